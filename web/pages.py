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

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from sessiontree.web import payloads
from sessiontree.web.api import EXPORTS, error_parts
from sessiontree.web.charts import branches_chart, calls_chart
from sessiontree.web.sessions import Held, OpenSessions
from sessiontree.wire.jsontext import dumps

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
             (url(base + "/diff", b=entry), "diff"), (base + "/usage", "usage")]
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
        '<div class="finders"><form action="/search" class="finder"><label for="search-box">Search entries</label>'
        '<input id="search-box" name="q" type="search" placeholder="words in any session\'s messages"></form>'
        '<div class="finder"><label for="filter">Filter sessions</label>'
        '<input id="filter" type="search" placeholder="by name or working folder" autofocus></div>'
        f'<span id="shown" class="dim">{len(infos)} sessions</span></div>'
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


FORK_ICON = ('<svg class="icon fork-icon" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true">'
             '<circle cx="4" cy="3" r="1.8"/><circle cx="4" cy="13" r="1.8"/><circle cx="12" cy="6" r="1.8"/>'
             '<path d="M4 4.8v6.4M4 9c0-2 8-1 8-3.2" fill="none"/></svg>')  # the branch-point mark (tree.js draws the same)


def _tree_body(request: Request, held: Held) -> str:
    from sessiontree.web.api import folds, is_pi, read_only

    mode = request.query_params.get("filter", "default")
    fold = folds(request)
    rows = held.rows(mode, fold)
    start = max(0, (rows.focus or 0) - 40)
    locked = read_only(held.session, request.app.state.allow_writes)
    why = ("this session's storage cannot be appended to" if getattr(held.session.storage, "read_only", False) else
           "pi's own session: start the server with serve --allow-writes to label, rename or move the leaf"
           if is_pi(held.session) else "")
    first = {"total": len(rows), "focus": rows.focus, "start": start, "rows": rows.window(start, 120), "filter": mode,
             "version": rows.version, "fold": sorted(fold), "read_only": locked,
             "read_only_reason": why if locked else None}
    options = "".join(f'<option{" selected" if f == mode else ""}>{f}</option>'
                      for f in ("default", "no-tools", "user", "labelled", "all"))
    data = dumps(first).decode().replace("</", "<\\/")
    rename = ('<form id="rename" class="inline"><label for="rename-box" class="dim">name</label> '
              '<input id="rename-box" name="name" placeholder="new session name"> <button>rename</button></form> ')
    note = f'<span class="badge warn" id="read-only" title="{e(why)}">read-only</span> '
    return (
        _header(held.session)
        + '<section class="tools"><label>filter <select id="tree-filter">' + options + "</select></label> "
        + (note if locked else rename)
        + f'<span class="dim" id="row-count">{len(rows):,} rows</span></section>'
        '<div class="split"><div id="tree" class="tree" tabindex="0"><div class="spacer"></div></div>'
        '<aside id="entry" class="entry"><p class="dim">Click an entry to see it whole, open its context, or act on it.'
        '</p></aside></div>'
        f'<script type="application/json" id="tree-data">{data}</script>'
        f'<p class="legend"><span class="leaf">leaf</span> <span class="label">label</span> '
        f'<span class="fork">{FORK_ICON} n</span> branch point · <span class="fold-mark">▸</span> fold a branch · '
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
        f'<form class="inline" method="get"><input name="entry" value="{e(entry or "")}" aria-label="entry" '
        'placeholder="entry id, prefix or label">'
        + (f'<input type="hidden" name="version" value="{e(version)}">' if version else "") + ' <button>show</button></form>'
        f'<p id="context-meta" data-tokens="{view["estimated_tokens"]}">{view["total_messages"]:,} messages · '
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
        + _event_strip(session) + '<div id="step" class="step"><p class="dim">loading…</p></div></section>')


STRIP_KINDS = {"message": "message", "compaction": "compaction", "branch_summary": "summary", "leaf": "move",
               "label": "label", "session_info": "label"}


def _event_strip(session: Any) -> str:
    """Every version of the session as a tick under the slider, by kind (compactions and leaf moves stand out):
    the heads alone, no replay. Past 1,200 versions neighbouring ones share a tick (the most notable kind wins)."""
    kinds = ["start"] + [STRIP_KINDS.get(h.type, "other") for h in session.iter_heads()]
    per = max(1, -(-len(kinds) // 1200))
    rank = {"compaction": 5, "move": 4, "summary": 3, "label": 2, "message": 1, "other": 0, "start": 0}
    ticks = [max(kinds[i:i + per], key=rank.__getitem__) for i in range(0, len(kinds), per)]
    width = 1000 / len(ticks)
    marks = "".join(f'<rect class="tick {kind}" x="{n * width:.2f}" width="{max(width - 0.5, 0.5):.2f}" '
                    f'y="{0 if kind in ("compaction", "move") else 6}" height="{18 if kind in ("compaction", "move") else 12}"/>'
                    for n, kind in enumerate(ticks))
    return (f'<svg id="event-strip" class="strip" viewBox="0 0 1000 18" preserveAspectRatio="none" data-per="{per}" '
            f'data-ticks="{len(ticks)}" aria-label="the session\'s events (click one to go there)">{marks}'
            f'<rect id="strip-now" class="now" x="0" y="0" width="{max(width, 2):.2f}" height="18"/></svg>'
            '<p class="chart-legend"><span class="key message"></span>entry <span class="key compaction"></span>compaction '
            '<span class="key move"></span>leaf moved <span class="key summary"></span>branch summary '
            '<span class="key label"></span>label or name</p>')


async def replay_page(request: Request) -> Response:
    return await render(request, lambda held: _replay_body(request, held), "replay", "Replay")


def _setting_text(name: str, settings: dict[str, Any]) -> str:
    value = settings[name]
    if name == "model":
        return _model(value)
    if name == "active_tool_names":
        return ", ".join(value) if value is not None else "(all)"
    return str(value)


def _tip_select(name: str, chosen: str | None, tips: list[dict[str, Any]], session: Any) -> str:
    options = []
    known = {t["id"] for t in tips}
    if chosen and chosen not in known:  # an entry in the middle of a branch, named in the address
        entry = session.entry(chosen)
        options.append(f'<option value="{e(chosen)}" selected>{e(chosen)} · {e(payloads.entry_brief_text(entry))}</option>')
    for tip in tips:
        mark = " (current branch)" if tip["current"] else ""
        options.append(f'<option value="{e(tip["id"])}"{" selected" if tip["id"] == chosen else ""}>'
                       f'{e(tip["id"])} · {e(tip["text"][:60])}{mark}</option>')
    return f'<label for="pick-{name}">{name.upper()}</label> <select id="pick-{name}" name="{name}">{"".join(options)}</select>'


def _marked(segments: list[list[str]]) -> str:
    tags = {"same": ("", ""), "del": ("<del>", "</del>"), "ins": ("<ins>", "</ins>")}
    return "".join(tags[kind][0] + e(text) + tags[kind][1] for kind, text in segments)


def _cell(message: dict[str, Any] | None, marks: list[list[str]] | None) -> str:
    if message is None:
        return '<td class="none"></td>'
    text = _marked(marks) if marks is not None else e(message["text"])
    return (f'<td class="r-{e(message["role"])}"><span class="role">{e(message["role"])}</span> {text} '
            f'<span class="dim">≈{message["tokens"]:,}</span></td>')


def _side_facts(title: str, side: dict[str, Any], sid: str) -> str:
    st, leaf = side["settings"], side["leaf_id"]
    only = "".join(f'<li><code>{e(x["id"])}</code> {e(x["text"])}</li>' for x in side["only"])
    more = side["only_count"] - len(side["only"])
    return (
        f'<div class="side"><h2>{title} <a href="{e(url(f"/sessions/{quote(sid)}/context", entry=leaf))}">'
        f'<code>{e(leaf or "(none)")}</code></a></h2><p class="dim">{e(side["entry"]["text"] if side["entry"] else "")}</p>'
        f'<p class="counts">{st["messages"]:,} messages · ≈{st["estimated_tokens"]:,} tokens · '
        f'{_n(side["only_count"], "entry", "entries")} only here</p>'
        f'<details><summary>entries only on {title}</summary><ol class="only">{only}</ol>'
        + (f'<p class="dim">… {more:,} more</p>' if more > 0 else "") + "</details></div>")


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _diff_body(request: Request, held: Held) -> str:
    session = held.session
    a_ref, b_ref = request.query_params.get("a") or None, request.query_params.get("b") or None
    d = payloads.diff_payload(session, a_ref, b_ref)
    a, b = d["a"]["leaf_id"], d["b"]["leaf_id"]
    form = (f'<form class="pick" method="get" id="diff-form">{_tip_select("a", a, d["tips"], session)} '
            f'{_tip_select("b", b, d["tips"], session)} <button>compare</button></form>')
    div = d["diverge_entry"]
    if d["same_branch"]:
        where = "A and B are the same entry: this session has no other branch to compare with."
    elif div:
        where = (f'They share {_n(d["shared_entries"], "entry", "entries")} and part after <code>{e(div["id"])}</code> '
                 f'{e(div["text"])}. Their contexts share the first {_n(d["shared_messages"], "message")}.')
    else:
        where = "They share no entry (different roots)."
    differ = "".join(
        f'<li><b>{e(name.replace("_", " "))}</b> <span class="was">{e(_setting_text(name, d["a"]["settings"]))}</span>'
        f' → <span class="now">{e(_setting_text(name, d["b"]["settings"]))}</span></li>' for name in d["settings_differ"])
    settings = (f'<ul id="settings-differ">{differ}</ul>' if differ else
                '<p id="settings-differ" class="dim">Model, thinking level and tools are the same on both.</p>')
    rows = "".join(f'<tr class="{e(r["op"])}">{_cell(r["a"], r.get("a_marks"))}{_cell(r["b"], r.get("b_marks"))}</tr>'
                   for r in d["rows"])
    table = (f'<table id="side-by-side"><thead><tr><th>A: after the shared messages</th><th>B</th></tr></thead>'
             f'<tbody>{rows}</tbody></table>' if rows else '<p class="dim">The two contexts hold the same messages.</p>')
    return (
        f'<h1>Diff <span class="dim">{e(session.get_session_name() or session.id)}</span></h1>{form}'
        f'<p id="diverge">{where}</p><h2>Settings that differ</h2>{settings}'
        f'<div class="sides">{_side_facts("A", d["a"], session.id)}{_side_facts("B", d["b"], session.id)}</div>'
        f'<h2>Messages side by side</h2>{table}')


async def diff_page(request: Request) -> Response:
    return await render(request, lambda held: _diff_body(request, held), "diff", "Diff", request.query_params.get("b"))


def _usage_body(request: Request, held: Held) -> str:
    u = payloads.usage_payload(held.session)
    session = held.session
    return (
        f'<h1>Usage <span class="dim">{e(session.get_session_name() or session.id)}</span></h1>'
        f'<p id="usage-total" class="big-numbers"><span><b>{len(u["calls"]):,}</b> model calls</span>'
        f'<span><b>{u["tokens"]:,}</b> tokens</span><span><b>${u["cost"]:.4f}</b> cost</span>'
        f'<span><b>{len(u["compactions"]):,}</b> compactions</span> <span class="dim">on the current branch</span></p>'
        f'<h2>Along the current branch</h2>{calls_chart(u)}'
        f'<h2>Each branch</h2>{branches_chart(u)}')


async def usage_page(request: Request) -> Response:
    return await render(request, lambda held: _usage_body(request, held), "usage", "Usage")


FAVICON = resources.files("sessiontree.web").joinpath("static/favicon.svg").read_bytes()


async def favicon(request: Request) -> Response:
    """Browsers ask for /favicon.ico whatever the page names: the same icon, so no request 404s."""
    return Response(FAVICON, media_type="image/svg+xml", headers={"cache-control": "no-store"})


ROUTES = [
    Route("/", sessions_page),
    Route("/favicon.ico", favicon),
    Route("/sessions/{sid}", tree_page),
    Route("/sessions/{sid}/context", context_page),
    Route("/sessions/{sid}/replay", replay_page),
    Route("/sessions/{sid}/diff", diff_page),
    Route("/sessions/{sid}/usage", usage_page),
]
