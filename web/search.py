"""Search in the viewer (issue 21's index): a results page linking each hit to its context, and its JSON endpoint."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sessiontree.web.api import error_parts, json_response
from sessiontree.web.pages import e, error_page, page
from sessiontree.web.sessions import OpenSessions

_MARKED = re.compile(r"\*\*(.+?)\*\*")


def _hits(request: Request) -> list[Any]:
    sessions: OpenSessions = request.app.state.sessions
    query = request.query_params.get("q", "")
    role = request.query_params.get("role") or None
    return list(sessions.repo.search(query, role=role, limit=50))


async def search_api(request: Request) -> Response:
    """``{"hits": [...]}`` as ``sessiontree search --json`` gives them; a query with no word is a 400."""
    try:
        hits = await run_in_threadpool(_hits, request)
    except ValueError as exc:
        return json_response({"error": {"code": "invalid_query", "message": str(exc)}}, 400)
    except Exception as exc:
        status, code, message = error_parts(exc)
        return json_response({"error": {"code": code, "message": message}}, status)
    return json_response({"hits": [hit.to_dict() for hit in hits]})


def _snippet(text: str) -> str:
    """The snippet escaped, its marked words as <mark> (the index marks them **word**)."""
    return _MARKED.sub(lambda m: f"<mark>{m.group(1)}</mark>", e(text))


async def search_page(request: Request) -> Response:
    query = request.query_params.get("q", "")
    try:
        hits = await run_in_threadpool(_hits, request) if query.strip() else []
    except ValueError as exc:
        hits, note = [], f'<p class="dim">{e(exc)}</p>'
    except Exception as exc:
        return error_page(request, exc)
    else:
        note = f'<p id="found" class="dim">{len(hits)} hit(s)</p>' if query.strip() else ""
    items = []
    for hit in hits:
        context = f"/sessions/{quote(hit.session_id)}/context?{urlencode({'entry': hit.entry_id})}"
        branch = "on the active branch" if hit.on_active_branch else "on another branch"
        items.append(
            f'<li class="hit" data-entry="{e(hit.entry_id)}"><a href="{e(context)}">{e(hit.session_name or hit.session_id)}'
            f" · {e(hit.kind)} {e(hit.entry_id)}</a> <span class=\"dim\">{e(hit.timestamp)}, {branch}</span>"
            f"<div>{_snippet(hit.snippet)}</div></li>")
    body = (f'<h1>Search</h1><form action="/search"><input name="q" type="search" value="{e(query)}" '
            'placeholder="words in any session (word* for a prefix, -word to exclude)" autofocus></form>'
            + note + '<ol id="hits">' + "".join(items) + "</ol>")
    return page(request, "search", "Search", body)


ROUTES = [Route("/search", search_page), Route("/api/search", search_api)]
