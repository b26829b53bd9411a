"""The HTML pages: rendered on the server from the same payloads the JSON endpoints return.

Session text is user data: everything from a session goes through ``html.escape`` (``e``), so a message holding
``<script>`` is shown as typed. Each page loads one small script module from ``static/`` for its interactive
parts (the virtualised tree, expanding clipped blocks, the replay slider); the pages read without it.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from importlib import resources
from string import Template
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from sessiontree.web import payloads
from sessiontree.web.api import EXPORTS, error_parts
from sessiontree.web.sessions import Held, OpenSessions

_BASE = Template(resources.files("sessiontree.web").joinpath("templates/base.html").read_text(encoding="utf-8"))


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def url(path: str, **query: Any) -> str:
    params = {k: v for k, v in query.items() if v is not None and v != ""}
    return path + ("?" + urlencode(params) if params else "")


def page(request: Request, page: str, title: str, body: str, nav: str = "", status: int = 200) -> HTMLResponse:
    token = request.app.state.token
    text = _BASE.substitute(title=e(title), token=e(token), page=page, nav=nav, body=body)
    return HTMLResponse(text, status, headers={"cache-control": "no-store", "referrer-policy": "no-referrer",
                                               "content-security-policy": "default-src 'self'; style-src 'self'; "
                                               "img-src 'self' data:; frame-ancestors 'none'"})


def session_nav(sid: str, entry: str | None = None) -> str:
    base = f"/sessions/{quote(sid)}"
    links = [(base, "tree"), (url(base + "/context", entry=entry), "context"), (url(base + "/replay"), "replay"),
             (url(base + "/diff", b=entry), "diff")]
    return " ".join(f'<a href="{e(href)}">{e(text)}</a>' for href, text in links)


def error_page(request: Request, exc: Exception) -> HTMLResponse:
    status, code, message = error_parts(exc)
    body = f'<section class="error"><h1>{status} {e(code)}</h1><p>{e(message)}</p><p><a href="/">all sessions</a></p></section>'
    return page(request, "error", f"{status} {code}", body, status=status)


async def render(request: Request, work: Callable[[Held], str], page_name: str, title: str, entry: str | None = None
                 ) -> Response:
    sessions: OpenSessions = request.app.state.sessions
    sid = request.path_params["sid"]
    try:
        body = await run_in_threadpool(sessions.run, sid, work)
    except Exception as exc:
        return error_page(request, exc)
    return page(request, page_name, title, body, session_nav(sid, entry))


async def sessions_page(request: Request) -> Response:
    sessions: OpenSessions = request.app.state.sessions
    try:
        infos = await run_in_threadpool(sessions.infos)
    except Exception as exc:
        return error_page(request, exc)
    rows = []
    for info in infos:
        link = f"/sessions/{quote(info.id)}"
        rows.append(
            f'<tr data-id="{e(info.id)}" data-name="{e((info.name or "").lower())}" data-cwd="{e(info.cwd.lower())}">'
            f'<td><a href="{e(link)}">{e(info.name or info.first_message or info.id)}</a><div class="dim">{e(info.id)}</div></td>'
            f'<td class="path">{e(info.cwd)}</td><td class="num" data-field="entries">…</td>'
            f'<td class="num">{info.message_count:,}</td><td class="time" data-time="{e(info.modified)}">{e(info.modified)}</td>'
            f'<td class="num" data-field="total_tokens">…</td><td class="num" data-field="cost_total">…</td>'
            f'<td data-field="verify"><span class="badge">…</span></td></tr>')
    body = (
        f'<h1>Sessions <span class="dim">in {e(sessions.url)}</span></h1>'
        '<form action="/search"><input name="q" type="search" placeholder="search every session\'s entries"></form>'
        '<p><input id="filter" type="search" placeholder="filter by name or cwd" autofocus> '
        f'<span id="shown" class="dim">{len(infos)} sessions</span></p>'
        '<table id="sessions"><thead><tr><th>session</th><th>cwd</th><th>entries</th><th>messages</th><th>last change</th>'
        '<th>tokens</th><th>cost</th><th>verify</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
        + ("" if infos else '<p class="dim">no sessions yet (run <code>sessiontree demo</code>)</p>'))
    return page(request, "sessions", "Sessions", body)


def _header(session: Any) -> str:
    """The session's heading: what costs no pass over the log (tokens, cost and the verify badge load after)."""
    sid, leaf = session.id, session.leaf_id
    exports = " ".join(
        f'<a href="{e(url(f"/api/sessions/{quote(sid)}/export", format=kind))}" download>{kind}</a>' for kind in EXPORTS)
    return (
        f'<section class="session" data-id="{e(sid)}" data-leaf="{e(leaf)}">'
        f'<h1><span id="session-name">{e(session.get_session_name() or "(unnamed)")}</span> <span class="dim">{e(sid)}</span> '
        f'<span class="badge" id="verify" data-id="{e(sid)}">verify…</span></h1>'
        f'<p class="dim">{e(session.header.cwd)} · {len(session):,} entries · <span id="usage">…</span> · '
        f'leaf {e(leaf or "(none)")} · export: {exports}</p></section>')


def _tree_body(request: Request, held: Held) -> str:
    mode = request.query_params.get("filter", "default")
    rows = held.rows(mode)
    start = max(0, (rows.focus or 0) - 40)
    first = {"total": len(rows), "focus": rows.focus, "start": start, "rows": rows.window(start, 120), "filter": mode,
             "version": rows.version}
    options = "".join(f'<option{" selected" if f == mode else ""}>{f}</option>'
                      for f in ("default", "no-tools", "user", "labelled", "all"))
    data = orjson.dumps(first).decode().replace("</", "<\\/")
    return (
        _header(held.session)
        + '<section class="tools"><label>filter <select id="tree-filter">' + options + "</select></label> "
        '<form id="rename" class="inline"><input name="name" placeholder="new session name"> <button>rename</button></form> '
        f'<span class="dim">{len(rows):,} rows</span></section>'
        '<div class="split"><div id="tree" class="tree" tabindex="0"><div class="spacer"></div></div>'
        '<aside id="entry" class="entry"><p class="dim">Click an entry to see it, its context, or act on it.</p></aside></div>'
        f'<script type="application/json" id="tree-data">{data}</script>'
        '<p class="legend"><span class="leaf">◀ leaf</span> <span class="label">[label]</span> ⑂ n branch point · '
        '<span class="t-compaction">compaction</span> · <span class="t-branch_summary">branch summary</span> · '
        'dim: off the current branch</p>')


async def tree_page(request: Request) -> Response:
    return await render(request, lambda held: _tree_body(request, held), "tree", "Tree")


def _model(model: dict[str, Any] | None) -> str:
    return f"{model['provider']}/{model['model_id']}" if model else "(not set)"


def _blocks_html(message: dict[str, Any], query: dict[str, Any]) -> str:
    out = []
    for block in message["blocks"]:
        more = ""
        if block["more_chars"]:
            link = url(f"/api/sessions/{quote(query['sid'])}/block", entry=query["entry"], version=query["version"],
                       message=message["index"], block=block["index"], repair=query["repair"])
            more = (f'<button class="more" data-src="{e(link)}">show all ({block["more_chars"]:,} more characters, '
                    f'{block["more_lines"]:,} more lines)</button>')
        out.append(f'<pre class="block {e(block["kind"])}">{e(block["text"])}</pre>{more}')
    return "".join(out)


def _context_body(request: Request, held: Held) -> str:
    entry, version, start = (request.query_params.get(k) for k in ("entry", "version", "start"))
    repair = request.query_params.get("repair") == "1"
    view = payloads.context_view(held.session, entry, int(version) if version else None, int(start) if start else None,
                                 repair=repair)
    query = {"sid": held.session.id, "entry": view["leaf_id"], "version": version, "repair": "1" if repair else None}
    model = view["model"]
    tools = view["active_tool_names"]
    head = view["entry"]
    messages = "".join(
        f'<article class="msg r-{e(m["role"])}" id="m{m["index"]}"><h3>#{m["index"]} {e(m["role"])} '
        f'<span class="dim">{" · ".join(e(n) for n in m["notes"])} · ≈{m["tokens"]:,} tokens</span></h3>'
        f'{_blocks_html(m, query)}</article>' for m in view["messages"])
    where = f'{e(head["id"])} <span class="dim">{e(head["text"])}</span>' if head else "(before the first entry)"
    at = f" · as of version {e(view['version'])}" if version else ""
    return (
        f'<h1>Context at {where}</h1>'
        f'<form class="inline" method="get"><input name="entry" value="{e(entry or "")}" placeholder="entry id, prefix or label">'
        + (f'<input type="hidden" name="version" value="{e(version)}">' if version else "") + ' <button>show</button></form>'
        f'<p id="context-meta" data-tokens="{view["estimated_tokens"]}">{len(view["messages"]):,} messages · '
        f'≈{view["estimated_tokens"]:,} tokens'
        + (f' ({view["reported_tokens"]:,} reported by the last reply)' if view["reported_tokens"] is not None else "")
        + f' · model {e(_model(model))}'
        f' · thinking {e(view["thinking_level"])} · tools {e(", ".join(tools) if tools is not None else "(all)")}{at}</p>'
        + _tool_pairs(request, view) + _pager(request, view)
        + f'<div id="messages">{messages or "<p class=dim>(an empty context)</p>"}</div>')


def _tool_pairs(request: Request, view: dict[str, Any]) -> str:
    """The tool-call problems of this context (docs/concepts.md), and a link between it as logged and repaired."""
    problems = view["problems"]
    if not problems:
        return ""
    query = {k: v for k, v in request.query_params.items() if k not in ("repair", "start")}
    items = "".join(f'<li><b>{e(p["kind"])}</b> {e(p["message"])}</li>' for p in problems)
    if view["repaired"]:
        state = (f'showing the context repaired (the log is unchanged) · '
                 f'<a href="{e(url(request.url.path, **query))}">show it as logged</a>')
    else:
        state = f'<a href="{e(url(request.url.path, **query, repair=1))}">show the context repaired</a>'
    return (f'<section id="tool-pairs" class="problems"><p>⚠ {len(problems)} tool-call problem(s) a provider would '
            f'refuse · {state}</p><ul>{items}</ul></section>')


def _pager(request: Request, view: dict[str, Any]) -> str:
    """Links to the other pages of a long context (it shows ``PAGE_MESSAGES`` at a time)."""
    total, first, size = view["total_messages"], view["start"], payloads.PAGE_MESSAGES
    if total <= size:
        return ""
    last = first + len(view["messages"]) - 1
    query = {k: v for k, v in request.query_params.items() if k != "start"}

    def link(text: str, start: int) -> str:
        return f'<a href="{e(url(request.url.path, **query, start=start))}">{text}</a>'

    return (f'<p id="pager">messages {first:,}–{last:,} of {total:,} · ' + " · ".join([
        link("first", 1), link("earlier", max(1, first - size)), link("later", min(total, last + 1)),
        link("last", max(1, total - size + 1))]) + "</p>")


async def context_page(request: Request) -> Response:
    return await render(request, lambda held: _context_body(request, held), "context", "Context",
                        request.query_params.get("entry"))


def _replay_body(request: Request, held: Held) -> str:
    session = held.session
    raw = request.query_params.get("version")
    version = min(max(1, int(raw)), session.version) if raw and raw.isdigit() else session.version
    return (
        f'<h1>Replay <span class="dim">{e(session.get_session_name() or session.id)}</span></h1>'
        f'<section id="replay" data-id="{e(session.id)}" data-versions="{session.version}" data-version="{version}">'
        '<div class="stepper"><button id="first" title="first event">|◀</button><button id="prev">◀</button>'
        f'<input id="slider" type="range" min="1" max="{session.version}" value="{version}">'
        '<button id="next">▶</button><button id="last" title="last event">▶|</button> '
        f'<input id="version" type="number" min="1" max="{session.version}" value="{version}"> / {session.version}</div>'
        '<div id="step" class="step"><p class="dim">loading…</p></div></section>')


async def replay_page(request: Request) -> Response:
    return await render(request, lambda held: _replay_body(request, held), "replay", "Replay")


def _side(title: str, side: dict[str, Any], sid: str) -> str:
    st = side["settings"]
    model = st["model"]
    only = "".join(f'<li><code>{e(x["id"])}</code> {e(x["text"])}</li>' for x in side["only"])
    more = side["only_count"] - len(side["only"])
    rest = "".join(f'<li class="r-{e(m["role"])}"><b>{e(m["role"])}</b> {e(m["text"])} '
                   f'<span class="dim">≈{m["tokens"]:,}</span></li>' for m in side["context_rest"])
    leaf = side["leaf_id"]
    return (
        f'<div class="side"><h2>{title}: <a href="{e(url(f"/sessions/{quote(sid)}/context", entry=leaf))}">'
        f'{e(leaf or "(none)")}</a></h2><p class="dim">{e(side["entry"]["text"] if side["entry"] else "")}</p>'
        f'<p>model {e(_model(model))} · thinking {e(st["thinking_level"])}'
        f' · {st["messages"]:,} messages · ≈{st["estimated_tokens"]:,} tokens</p>'
        f'<h3>{side["only_count"]:,} entries only on this branch</h3><ol class="only">{only}</ol>'
        + (f'<p class="dim">… {more:,} more</p>' if more > 0 else "")
        + f'<h3>{side["context_rest_count"]:,} context messages after the shared ones</h3><ol class="rest">{rest}</ol></div>')


def _diff_body(request: Request, held: Held) -> str:
    session = held.session
    a, b = request.query_params.get("a") or "", request.query_params.get("b") or ""
    tips = payloads.summary(session)
    choices = "".join(f'<option value="{e(t)}">' for t in tips["branch_tips"]) + "".join(
        f'<option value="{e(label)}">' for label in tips["labels"].values())
    form = (f'<form class="inline" method="get" id="diff-form"><datalist id="refs">{choices}</datalist>'
            f'A <input name="a" list="refs" value="{e(a)}" placeholder="current leaf"> '
            f'B <input name="b" list="refs" value="{e(b)}" placeholder="current leaf"> <button>compare</button></form>')
    d = payloads.diff_payload(session, a or None, b or None)
    div = d["diverge_entry"]
    where = (f'They share {d["shared_entries"]:,} entries and diverge after <code>{e(div["id"])}</code> {e(div["text"])}'
             if div else "They share no entry (different roots).")
    differ = ", ".join(d["settings_differ"]) or "nothing"
    return (
        f'<h1>Diff <span class="dim">{e(session.get_session_name() or session.id)}</span></h1>{form}'
        f'<p id="diverge">{where}. Their contexts share the first {d["shared_messages"]:,} messages; settings that differ: '
        f'{e(differ)}.</p><div class="sides">{_side("A", d["a"], session.id)}{_side("B", d["b"], session.id)}</div>')


async def diff_page(request: Request) -> Response:
    return await render(request, lambda held: _diff_body(request, held), "diff", "Diff", request.query_params.get("b"))


ROUTES = [
    Route("/", sessions_page),
    Route("/sessions/{sid}", tree_page),
    Route("/sessions/{sid}/context", context_page),
    Route("/sessions/{sid}/replay", replay_page),
    Route("/sessions/{sid}/diff", diff_page),
]
