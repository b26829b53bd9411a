"""The JSON endpoints (docs/web.md): what the pages fetch, usable on their own with the token.

Every handler runs its work in a worker thread under the open sessions' lock (``sessions.py``). Reads never
write; the three writes (label, name, move) go through the session API, so they land in the log like any other
append. Errors are ``{"error": {"code", "message"}}`` with 404 (not found), 409 (conflict) or 400.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sessiontree.cli.output import CliError
from sessiontree.domain.errors import SessionError
from sessiontree.web import payloads
from sessiontree.web.rows import MAX_WINDOW
from sessiontree.web.sessions import Held, OpenSessions, file_signature
from sessiontree.wire.jsontext import DECODE_ERRORS, decode, dumps

STATUS = {"not_found": 404, "conflict": 409, "read_only": 409}
EXPORTS = {"markdown": ("text/markdown", "md"), "html": ("text/html", "html"), "pi": ("application/x-ndjson", "jsonl"),
           "native": ("application/x-ndjson", "jsonl")}


def json_response(data: Any, status: int = 200) -> Response:
    return Response(dumps(data, str), status, media_type="application/json",
                    headers={"cache-control": "no-store"})


def error_parts(exc: Exception) -> tuple[int, str, str]:
    """(status, code, message) of an error a handler raised; the message does not repeat the code."""
    if isinstance(exc, SessionError):
        return STATUS.get(exc.code, 400), exc.code, str(exc).removeprefix(f"{exc.code}: ")
    if isinstance(exc, CliError):
        return STATUS.get(exc.code, 400), exc.code, exc.message
    if isinstance(exc, (ValueError, TypeError)):
        return 400, "invalid", str(exc)
    raise exc


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise CliError(f"{name} must be a whole number, not {raw!r}") from None


Work = Callable[[Held], Any]


def endpoint(make: Callable[[Request], Work]) -> Callable[[Request], Awaitable[Response]]:
    """A handler from ``make(request) -> work(held)``: run off the event loop, errors as JSON."""
    async def handle(request: Request) -> Response:
        sessions: OpenSessions = request.app.state.sessions
        try:
            work = make(request)
            result = await run_in_threadpool(sessions.run, request.path_params["sid"], work)
        except Exception as exc:
            status, code, message = error_parts(exc)
            return json_response({"error": {"code": code, "message": message}}, status)
        return result if isinstance(result, Response) else json_response(result)
    return handle


async def list_sessions(request: Request) -> Response:
    sessions: OpenSessions = request.app.state.sessions
    needle = request.query_params.get("q", "").lower()
    try:
        infos = await run_in_threadpool(sessions.infos)
    except Exception as exc:
        status, code, message = error_parts(exc)
        return json_response({"error": {"code": code, "message": message}}, status)
    rows = [payloads.info_row(i) for i in infos]
    if needle:
        rows = [r for r in rows if needle in (r["name"] or "").lower() or needle in (r["cwd"] or "").lower()]
    return json_response({"repository": sessions.url, "sessions": rows})


def _summary(request: Request) -> Work:
    allow = request.app.state.allow_writes
    return lambda held: {**payloads.summary(held.session), "read_only": read_only(held.session, allow)}


def read_only(session: Any, allow_writes: bool) -> bool:
    """Whether the viewer refuses writes to ``session``: one its storage cannot append to, and a file pi wrote
    (pi's own sessions are pi's to change) unless ``serve --allow-writes`` was given."""
    if getattr(session.storage, "read_only", False):
        return True
    return is_pi(session) and not allow_writes


def is_pi(session: Any) -> bool:
    from sessiontree.pi.pi_storage import PiSessionStorage

    return isinstance(session.storage, PiSessionStorage)


async def verify_session(request: Request) -> Response:
    """The verify report, kept until the file changes. A file is checked as it is on the disk, outside the sessions'
    locks, without opening it as a session: a log too damaged to open still gets its report (its first bad line)."""
    sessions: OpenSessions = request.app.state.sessions
    sid = request.path_params["sid"]
    try:
        path = await run_in_threadpool(sessions.file_of, sid)
        if path is None:  # a database session, or none by this id (run says which)
            payload = await run_in_threadpool(sessions.run, sid, lambda h: payloads.verify_payload(h.session))
            return json_response(payload)
        signature = file_signature(path)
        kept = sessions.verified.get(sid)
        if kept is not None and kept[0] == (path, signature):
            return json_response(kept[1])
        payload = await run_in_threadpool(payloads.verify_payload, path)
        sessions.verified[sid] = ((path, signature), payload)
    except Exception as exc:
        status, code, message = error_parts(exc)
        return json_response({"error": {"code": code, "message": message}}, status)
    return json_response(payload)


def _stats(request: Request) -> Work:
    return lambda held: payloads.stats_json(held.session)


def _tree(request: Request) -> Work:
    mode = request.query_params.get("filter", "default")
    start, count = _int(request, "start", 0), _int(request, "count", 200)
    fold = folds(request)

    def work(held: Held) -> Any:
        rows = held.rows(mode, fold)
        first = rows.focus if start is None or start < 0 else start
        return {"session_id": held.session.id, "version": rows.version, "filter": mode, "total": len(rows),
                "leaf_id": rows.leaf_id, "focus": rows.focus, "start": first or 0, "max_count": MAX_WINDOW,
                "rows": rows.window(first or 0, count or 0)}
    return work


def folds(request: Request) -> frozenset[str]:
    """The branches to show folded: ``fold=ID,ID`` (ids of rows that start a branch)."""
    return frozenset(x for x in request.query_params.get("fold", "").split(",") if x)


def _context(request: Request) -> Work:
    entry, version = request.query_params.get("entry"), _int(request, "version")
    if request.query_params.get("view") == "page":
        start, count = _int(request, "start"), _int(request, "count", payloads.PAGE_MESSAGES)
        repair = request.query_params.get("repair") == "1"
        return lambda held: payloads.context_view(held.session, entry, version, start, count or payloads.PAGE_MESSAGES,
                                                  repair)
    return lambda held: payloads.context_json(held.session, entry, version)


def _entry(request: Request) -> Work:
    entry, part = request.query_params.get("entry"), _int(request, "part")
    return lambda held: payloads.entry_payload(held.session, entry, part)


def _usage(request: Request) -> Work:
    return lambda held: payloads.usage_payload(held.session)


def _block(request: Request) -> Work:
    entry, version = request.query_params.get("entry"), _int(request, "version")
    message, block = _int(request, "message", 1), _int(request, "block", 0)
    repair = request.query_params.get("repair") == "1"
    return lambda held: payloads.block_payload(held.session, entry, message or 0, block or 0, version, repair)


def _replay(request: Request) -> Work:
    version = int(request.path_params["version"])
    return lambda held: payloads.replay_step(held.session, version)


def _diff(request: Request) -> Work:
    a, b = request.query_params.get("a"), request.query_params.get("b")
    return lambda held: payloads.diff_payload(held.session, a, b)


def _export(request: Request) -> Work:
    kind = request.query_params.get("format", "markdown")
    if kind not in EXPORTS:
        raise CliError(f"unknown export format {kind!r} (choose from {', '.join(EXPORTS)})")
    leaf = request.query_params.get("leaf")

    def work(held: Held) -> Response:
        data = export_bytes(held.session, kind, leaf)
        media, suffix = EXPORTS[kind]
        disposition = f'attachment; filename="{held.session.id}.{kind}.{suffix}"'
        return Response(data, media_type=media, headers={"content-disposition": disposition, "cache-control": "no-store"})
    return work


def export_bytes(session: Any, kind: str, leaf: str | None) -> bytes:
    """The session exported as ``sessiontree export --format kind`` writes it."""
    if kind in ("markdown", "html"):
        from sessiontree.cli import share

        document = share.branch_document(session, payloads.resolve(session, leaf) if leaf else None)
        return (share.to_markdown(document) if kind == "markdown" else share.to_html(document)).encode()
    from sessiontree.pi.pi import pi_codec
    from sessiontree.pi.pi_convert import convert
    from sessiontree.wire.codec import native_codec

    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "session.jsonl")
        codec = native_codec()
        with open(source, "wb") as handle:  # the entries as read: the session's own file is never reopened
            handle.write(codec.encode_event(session.header) + b"\n")
            for entry in session.get_entries():
                handle.write(codec.encode_event(entry) + b"\n")
        dest = os.path.join(tmp, "export.jsonl")
        convert(source, dest, pi_codec() if kind == "pi" else native_codec())
        return Path(dest).read_bytes()


async def _body(request: Request) -> dict[str, Any]:
    try:
        data = decode(await request.body())
    except DECODE_ERRORS:
        raise CliError("the request body must be a JSON object") from None
    if not isinstance(data, dict):
        raise CliError("the request body must be a JSON object")
    return data


def write_endpoint(apply: Callable[[Any, dict[str, Any]], Any]) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler: ``apply(session, body)`` appends through the session API; answers the new summary."""
    async def handle(request: Request) -> Response:
        sessions: OpenSessions = request.app.state.sessions
        try:
            body = await _body(request)

            allow = request.app.state.allow_writes

            def work(held: Held) -> Any:
                if read_only(held.session, allow):
                    raise CliError(f"session {held.session.id} is open read-only in this viewer"
                                   + (" (a pi session: start the server with 'serve --allow-writes' to change it)"
                                      if is_pi(held.session) else ""), code="read_only")
                result = apply(held.session, body)
                return {"result": result, "session": {**payloads.summary(held.session), "read_only": False}}

            sid = request.path_params["sid"]
            try:
                data = await run_in_threadpool(sessions.run, sid, work)
            finally:
                await run_in_threadpool(sessions.release, sid)
        except Exception as exc:
            status, code, message = error_parts(exc)
            return json_response({"error": {"code": code, "message": message}}, status)
        return json_response(data)
    return handle


def _text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise CliError(f"{name} must be a string or null")
    return value or None


def _label(session: Any, body: dict[str, Any]) -> Any:
    target = payloads.resolve(session, _text(body, "entry") or "")
    if target is None:
        raise CliError("label needs an entry")
    return session.append_label_change(target, _text(body, "label"))


def _name(session: Any, body: dict[str, Any]) -> Any:
    return session.append_session_info(_text(body, "name"))


def _move(session: Any, body: dict[str, Any]) -> Any:
    ref = _text(body, "entry")
    if ref is None:
        raise CliError("move needs an entry (or 'root')")
    target = None if ref == "root" else payloads.resolve(session, ref)
    summary = _text(body, "summary")
    session.move_to(target, {"summary": summary} if summary else None)
    return session.leaf_id


ROUTES = [
    Route("/api/sessions", list_sessions),
    Route("/api/sessions/{sid}", endpoint(_summary)),
    Route("/api/sessions/{sid}/verify", verify_session),
    Route("/api/sessions/{sid}/stats", endpoint(_stats)),
    Route("/api/sessions/{sid}/tree", endpoint(_tree)),
    Route("/api/sessions/{sid}/context", endpoint(_context)),
    Route("/api/sessions/{sid}/block", endpoint(_block)),
    Route("/api/sessions/{sid}/entry", endpoint(_entry)),
    Route("/api/sessions/{sid}/usage", endpoint(_usage)),
    Route("/api/sessions/{sid}/replay/{version:int}", endpoint(_replay)),
    Route("/api/sessions/{sid}/diff", endpoint(_diff)),
    Route("/api/sessions/{sid}/export", endpoint(_export)),
    Route("/api/sessions/{sid}/label", write_endpoint(_label), methods=["POST"]),
    Route("/api/sessions/{sid}/name", write_endpoint(_name), methods=["POST"]),
    Route("/api/sessions/{sid}/move", write_endpoint(_move), methods=["POST"]),
]
