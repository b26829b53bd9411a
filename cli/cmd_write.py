"""Write commands: ``fork``, ``label``, ``name``, ``move``, ``compact``.

Each goes through the same ``Session`` (or repository) API a program would use, so the
invariants are the library's: an unknown entry id is refused and nothing is appended. A
fork is a new session: it goes to a repository of sessiontree's own (``cli/destination.py``),
never into pi's folders.
"""

from __future__ import annotations

import argparse
import os
from contextlib import ExitStack
from typing import Any

from rich.text import Text

from sessiontree.cli.clip import clip_field, clip_repr
from sessiontree.cli.destination import OneFile, file_source, new_sessions_url, open_target, same_repository
from sessiontree.cli.output import CliError, print_json, stdout
from sessiontree.cli.target import (
    directory_hint,
    feature,
    looks_like_path,
    open_file,
    open_repository,
    repo_url,
    resolve_entry,
    resolve_id,
    session_for,
)
from sessiontree.domain.errors import SessionError


def _done(args: argparse.Namespace, payload: dict[str, Any], message: Text | str) -> int:
    if args.json:
        print_json(payload)
    else:
        stdout().print(message)
    return 0


def cmd_label(args: argparse.Namespace) -> int:
    if args.clear and args.text is not None:
        raise CliError("give a label or --clear, not both")
    text = None if args.clear else args.text
    if text is None and not args.clear:
        raise CliError("give the label text, or --clear to remove the entry's label")
    with session_for(args.repo, args.session, args) as session:
        entry_id = session.append_label_change(args.entry, text)
        payload = {"session_id": session.id, "entry_id": entry_id, "target_id": args.entry, "label": text}
        said = f"labelled {args.entry} {clip_repr(text)}" if text else f"cleared the label of {args.entry}"
        return _done(args, payload, Text(f"{said} (label entry {entry_id})"))


def cmd_name(args: argparse.Namespace) -> int:
    if args.clear and args.text is not None:
        raise CliError("give a name or --clear, not both")
    if args.text is not None and args.session is None and _names_a_session(args.repo, args.text):
        args.session, args.text = args.text, None  # `name SESSION`: print that session's name, never rename to its id
    if args.text is not None:
        _check_new_name(args.repo, args.text)
    with session_for(args.repo, args.session) as session:
        if args.text is None and not args.clear:
            name = session.get_session_name()
            return _done(args, {"session_id": session.id, "name": name}, Text(clip_field(name) if name else "(no name)"))
        entry_id = session.append_session_info(None if args.clear else args.text)
        name = session.get_session_name()
        payload = {"session_id": session.id, "entry_id": entry_id, "name": name}
        return _done(args, payload, Text(f"named the session {clip_repr(name)}" if name else "cleared the session's name"))


def _sessions(option_repo: str | None) -> list[Any]:
    """The listing of ``--repo``, or [] when there is no repository to read."""
    try:
        repo = open_repository(option_repo)
    except SessionError:
        return []
    with repo:
        return list(repo.list())


def _names_a_session(option_repo: str | None, word: str) -> bool:
    """Does the one word given to ``name`` name a session (a session file, an id, an id prefix or a name)?"""
    if looks_like_path(word) and os.path.exists(word):
        return True
    return any(i.id.startswith(word) or i.name == word for i in _sessions(option_repo))


def _check_new_name(option_repo: str | None, text: str) -> None:
    """A name that is also a session's id or id prefix is refused: `show NAME` would then name two sessions."""
    clash = next((i for i in _sessions(option_repo) if text.strip() and i.id.startswith(text.strip())), None)
    if clash is not None:
        what = "the id" if clash.id == text.strip() else "a prefix of the id"
        raise CliError(f"{text!r} is {what} of session {clash.id}: a session name must not be an id or id prefix "
                       "(it would name two sessions); choose another name", code="invalid_name")


def cmd_move(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
        target = None if args.entry == "root" else args.entry
        before = session.leaf_id
        if args.summarize and args.summary is not None:
            raise CliError("give --summary TEXT or --summarize, not both")
        if args.summarize:
            extractive = feature("sessiontree.compaction", "extractive_summary", "the offline summariser")
            summary_id = session.move_to(target, summarize=extractive)
        else:
            summary_id = session.move_to(target, {"summary": args.summary} if args.summary is not None else None)
        payload = {"session_id": session.id, "leaf_before": before, "leaf_id": session.leaf_id, "branch_summary_id": summary_id}
        message = Text(f"moved the leaf from {before or '(none)'} to {target or 'before the first entry'}")
        if summary_id:
            message.append(f"; the branch left is summarised in {summary_id}, the new leaf")
        return _done(args, payload, message)


def _fork_source(args: argparse.Namespace) -> tuple[Any, str, str | None]:
    """The repository holding the session to fork, its id, and its URL (None for a session file)."""
    if args.session is not None and looks_like_path(args.session):
        repo, sid = file_source(args.session)
        return repo, sid, None
    with directory_hint(args.session):
        repo = open_repository(args.repo)
        try:
            return repo, resolve_id(repo, args.session, repo_url(args.repo)), repo_url(args.repo)
        except BaseException:
            repo.close()
            raise


def _resolve_entry(source: Any, sid: str, args: argparse.Namespace) -> None:
    """``--entry`` by id prefix or label, as every command takes an entry (a source that does not open is left for the
    fork to report, or to salvage)."""
    if args.entry is None:
        return
    one_file = isinstance(source.store, OneFile)
    if args.salvage:  # resolved among what the salvage reads, on a read-only storage of its own
        session = open_file(args.session, salvage=True) if one_file else source.open(sid, salvage=True)
    else:
        session = source.open(sid)
    try:
        args.entry = resolve_entry(session, args.entry)
    finally:
        if args.salvage or not one_file:  # a session file's own storage is closed with its source
            session.close()


def cmd_fork(args: argparse.Namespace) -> int:
    position = args.position or "at"
    target_url = new_sessions_url(args, "the fork")  # before the source is opened: a refusal costs nothing
    source, sid, source_url = _fork_source(args)
    with ExitStack() as stack:
        stack.enter_context(source)
        _resolve_entry(source, sid, args)
        if source_url is not None and same_repository(source_url, target_url):
            target = source
        else:
            target = stack.enter_context(open_target(target_url))
        try:
            fork = source.fork(sid, args.entry, position, salvage=args.salvage, into=target)
        except SessionError as exc:  # the library's advice names its keyword; a user of the CLI has a flag
            if exc.code != "invalid_fork_target":
                raise
            raise SessionError(exc.code, exc.message.replace("position='at'", "--position at")) from None
        try:
            payload = {
                "session_id": fork.id,
                "location": fork.storage.location,
                "parent_session": fork.header.parent_session,
                "entries": len(fork),
                "leaf_id": fork.leaf_id,
                "source": fork.header.extra.get("source"),
            }
            where = f"{position} {args.entry}" if args.entry else "at its leaf"
            message = Text.assemble(
                f"forked {sid} {where} into ", (fork.id, "bold cyan"), f" ({len(fork)} entries, {fork.storage.location})",
                "; it is now the newest session there, which commands without a SESSION work on",
            )
            return _done(args, payload, message)
        finally:
            fork.close()


def compact_report(
    session: Any, *, keep_recent_tokens: int | None = None, retain_tail: bool = False, dry_run: bool = False
) -> dict[str, Any]:
    """Plan, compact with the offline stand-in summariser (unless ``dry_run``) and report.

    JSON-ready: ``compacted``, ``entry_id``, ``first_kept_entry_id``, ``tokens_before``,
    ``tokens_after`` (None unless it compacted), ``summarized_entries``, ``summarized_messages``,
    ``kept_entries``, ``summarized_tokens``, ``kept_tokens``, ``fits``.
    """
    from sessiontree import compaction
    from sessiontree.compaction import extractive_summary
    from sessiontree.projections.compaction import DEFAULT_KEEP_RECENT_TOKENS

    keep = DEFAULT_KEEP_RECENT_TOKENS if keep_recent_tokens is None else keep_recent_tokens
    planned = compaction.plan(session, keep, retain_tail)
    entry_id = None
    if not dry_run and not planned.is_empty:
        entry_id = compaction.compact(session, extractive_summary, keep, retain_tail, planned=planned)
    return {
        "compacted": entry_id is not None,
        "entry_id": entry_id,
        "first_kept_entry_id": planned.first_kept_entry_id,
        "tokens_before": planned.tokens_before,
        "tokens_after": compaction.estimate_context_tokens(session).tokens if entry_id is not None else None,
        "summarized_entries": len(planned.summarized_entry_ids),
        "summarized_messages": len(planned.messages_to_summarize),
        "kept_entries": len(planned.kept_entry_ids),
        "summarized_tokens": planned.summarized_tokens,
        "kept_tokens": planned.kept_tokens,
        "fits": planned.fits,
    }


def _default_keep() -> int:
    from sessiontree.projections.compaction import DEFAULT_KEEP_RECENT_TOKENS

    return DEFAULT_KEEP_RECENT_TOKENS


def cmd_compact(args: argparse.Namespace) -> int:
    kwargs: dict[str, Any] = {"retain_tail": args.retain_tail, "dry_run": args.dry_run}
    if args.keep_tokens is not None:
        if args.keep_tokens < 0:
            raise CliError("--keep-tokens must be 0 or more")
        kwargs["keep_recent_tokens"] = args.keep_tokens
    with session_for(args.repo, args.session) as session:
        report = compact_report(session, **kwargs)
        report = {"session_id": session.id, **report}
        if args.json:
            print_json(report)
            return 0
        console = stdout()
        if not report["summarized_entries"]:
            budget = kwargs.get("keep_recent_tokens", _default_keep())
            console.print(Text(
                f"nothing to compact: the {report['kept_entries']} entries since the last compaction (≈"
                f"{report['kept_tokens']:,} tokens, characters / 4) fit in the {budget:,} tokens of recent turns kept "
                "verbatim (--keep-tokens N keeps fewer)"))
            return 0
        verb = "would summarise" if args.dry_run else "summarised"
        console.print(
            Text(
                f"{verb} {report['summarized_entries']} entries (≈{report['summarized_tokens']:,} tokens), "
                f"keeping {report['kept_entries']} from {report['first_kept_entry_id'] or '(none)'} "
                f"(≈{report['kept_tokens']:,} tokens)"
            )
        )
        if report["compacted"]:
            console.print(
                Text(
                    f"compaction entry {report['entry_id']}: context ≈{report['tokens_before']:,} → "
                    f"≈{report['tokens_after']:,} tokens"
                )
            )
    return 0
