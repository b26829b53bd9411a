"""``sessiontree serve``: the local web viewer (``sessiontree.web``, the ``sessiontree[web]`` extra).

Only this command imports the web stack, so every other command, and ``import sessiontree``, runs without it.
"""

from __future__ import annotations

import argparse
import importlib.util

from sessiontree.cli.output import CliError


def cmd_serve(args: argparse.Namespace) -> int:
    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(f"sessiontree serve needs {' and '.join(missing)}: pip install 'sessiontree[web]'", code="missing_extra")
    if args.json:
        raise CliError("serve prints its URL as the first line on stdout; --json does not apply")
    from sessiontree.web.server import serve

    return serve(args.repo, args.host, args.port, not args.no_browser, allow_writes=args.allow_writes)
