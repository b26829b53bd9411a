"""``redact``: erase one entry's content through ``Session.redact`` (docs/audit.md, *Erasure*).

The entry's line is rewritten without its content and a redaction record is appended; verify then reports the
erasure and still fails on any other change. pi's files are refused unchanged (pi could not keep the record)."""

from __future__ import annotations

import argparse

from rich.text import Text

from sessiontree.cli.output import print_json, stdout
from sessiontree.cli.target import session_for


def cmd_redact(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
        record_id = session.redact(args.entry, reason=args.reason, by=args.by)
        payload = {"session_id": session.id, "entry_id": args.entry, "record_id": record_id, "reason": args.reason}
        if getattr(args, "vacuum", False):
            from sessiontree.audit.erasure import vacuum

            payload["vacuum"] = vacuum(session.storage)
        if args.json:
            print_json(payload)
        else:
            stdout().print(Text(f"erased the content of {args.entry} (redaction record {record_id}); "
                                f"verify reports it and still checks every other line"))
            if "vacuum" in payload:
                stdout().print(Text(str(payload["vacuum"])))
    return 0
