"""The token rule on every endpoint, the cookie hand-over, CSRF protection of writes, and that reads never write."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sessiontree_cli_runner import run
from sessiontree_web import snapshot

ENDPOINTS = [
    "/", "/sessions/{sid}", "/sessions/{sid}/context", "/sessions/{sid}/replay", "/sessions/{sid}/diff",
    "/search?q=cache", "/api/search?q=cache",
    "/static/app.css", "/static/tree.js", "/static/no-such-file.js", "/no/such/page",
    "/api/sessions", "/api/sessions/{sid}", "/api/sessions/{sid}/verify", "/api/sessions/{sid}/stats",
    "/api/sessions/{sid}/tree", "/api/sessions/{sid}/tree?start=0&count=5", "/api/sessions/{sid}/context",
    "/api/sessions/{sid}/context?entry={diagnosis}", "/api/sessions/{sid}/block?entry={diagnosis}&message=1&block=0",
    "/api/sessions/{sid}/replay/3", "/api/sessions/{sid}/diff?a={quick_fix_end}", "/api/sessions/{sid}/export?format=pi",
    "/api/sessions/{sid}/export?format=markdown", "/api/sessions/{sid}/export?format=html",
    "/api/sessions/{sid}/export?format=native",
]
WRITES = [("/api/sessions/{sid}/label", {"entry": "{diagnosis}", "label": "x"}), ("/api/sessions/{sid}/name", {"name": "n"}),
          ("/api/sessions/{sid}/move", {"entry": "{diagnosis}"})]


def _paths(demo: dict[str, Any]) -> list[str]:
    return [p.format(sid=demo["session_id"], **demo["ids"]) for p in ENDPOINTS]


def test_no_request_without_the_token_gets_data(serve, demo):
    server = serve(demo["repo"])
    wrong = server.token[:-1] + ("A" if server.token[-1] != "A" else "B")
    for path in _paths(demo):
        for headers in ({}, {"X-Sessiontree-Token": wrong}, {"Authorization": f"Bearer {wrong}"},
                        {"Cookie": f"sessiontree_token_0={server.token}; other={server.token}"}):
            status, body, _ = server.get(path, token=False, headers=headers)
            assert status == 401, (path, headers, status)
            assert demo["session_id"].encode() not in body and b"flaky" not in body.lower()
        status, _, _ = server.get(path + ("&" if "?" in path else "?") + f"token={wrong}", token=False)
        assert status == 401, path
    for path, body in WRITES:
        status, _, _ = server.request("POST", path.format(sid=demo["session_id"]), json.dumps(body).encode(), token=False)
        assert status == 401


def test_every_endpoint_answers_with_the_token_and_reads_never_write(serve, demo):
    before = snapshot(demo["repo"])
    server = serve(demo["repo"])
    for path in _paths(demo):
        status, body, headers = server.get(path)
        expected = 404 if "no-such" in path or "/no/such" in path else 200
        assert status == expected, (path, status, body[:300])
        assert headers["cache-control"] == "no-store" or path.startswith("/static") or status == 404
    assert snapshot(demo["repo"]) == before  # bytes and mtime of every session file


def test_the_first_visit_moves_the_token_into_a_cookie(serve, demo):
    server = serve(demo["repo"])
    status, _, headers = server.get(f"/sessions/{demo['session_id']}?filter=user&token={server.token}", token=False)
    assert status == 303
    assert headers["location"] == f"/sessions/{demo['session_id']}?filter=user"
    cookie = headers["set-cookie"]
    assert f"={server.token}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    name = cookie.split("=", 1)[0]
    status, body, _ = server.get(f"/sessions/{demo['session_id']}", token=False, headers={"Cookie": f"{name}={server.token}"})
    assert status == 200 and b"Fix the flaky cache test" in body
    status, body, _ = server.get(f"/api/sessions?token={server.token}", token=False)  # the API answers a token in the query
    assert status == 200 and json.loads(body)["sessions"][0]["id"] == demo["session_id"]


@pytest.mark.parametrize("headers", [
    {"Cookie": "{cookie}"},  # a cross-site form would send the cookie (were it not SameSite) but cannot set a header
    {"Cookie": "{cookie}", "X-Sessiontree-Token": "{token}", "Origin": "http://evil.example"},
])
def test_a_write_needs_the_token_header_from_our_origin(serve, demo, headers):
    server = serve(demo["repo"])
    port = server.base.rsplit(":", 1)[1]
    sent = {k: v.format(cookie=f"sessiontree_token_{port}={server.token}", token=server.token) for k, v in headers.items()}
    before = snapshot(demo["repo"])
    body = json.dumps({"name": "renamed"}).encode()
    status, _, _ = server.request("POST", f"/api/sessions/{demo['session_id']}/name", body, token=False, headers=sent)
    assert status == 403
    assert snapshot(demo["repo"]) == before


def test_writes_go_through_the_session_api(serve, demo):
    server = serve(demo["repo"])
    sid, ids = demo["session_id"], demo["ids"]
    origin = {"Origin": server.base, "Content-Type": "application/json"}

    def post(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, data, _ = server.request("POST", f"/api/sessions/{sid}/{path}", json.dumps(body).encode(), headers=origin)
        return status, json.loads(data)

    assert post("label", {"entry": ids["quick_fix"][:5], "label": "tried-B"})[0] == 200
    assert post("name", {"name": "Renamed in the browser"})[0] == 200
    status, data = post("move", {"entry": "tried-B", "summary": "Back to B"})
    assert status == 200 and data["session"]["leaf_id"] == data["result"]
    status, data = post("label", {"entry": "no-such-entry", "label": "x"})
    assert status == 404 and data["error"]["code"] == "not_found"
    assert post("move", {})[0] == 400
    shown = json.loads(run(("show", "--repo", str(demo["repo"]), "--filter", "all", "--json"), demo["repo"].parent).stdout)
    assert shown["name"] == "Renamed in the browser"
    entries = {row["id"]: row for row in shown["rows"]}
    assert entries[ids["quick_fix"]]["label"] == "tried-B"
    leaf = entries[shown["leaf_id"]]
    assert leaf["type"] == "branch_summary" and leaf["entry"]["summary"] == "Back to B"
    assert leaf["parent_id"] == ids["quick_fix"]
    status, body, _ = server.get(f"/api/sessions/{sid}/verify")
    assert json.loads(body)["ok"] is True  # the writes are chained like any other append


def test_an_unknown_session_and_bad_arguments_are_clear_errors(serve, demo):
    server = serve(demo["repo"])
    status, body, _ = server.get("/api/sessions/nope")
    assert status == 404 and json.loads(body)["error"]["code"] == "not_found"
    status, body, _ = server.get("/sessions/nope")
    assert status == 404 and b"no session" in body
    status, body, _ = server.get(f"/api/sessions/{demo['session_id']}/tree?start=x")
    assert status == 400 and b"whole number" in body
    status, body, _ = server.get(f"/api/sessions/{demo['session_id']}/replay/999")
    assert status == 404
    status, body, _ = server.get(f"/api/sessions/{demo['session_id']}/export?format=pdf")
    assert status == 400 and b"pdf" in body


def test_the_agent_can_go_on_appending_and_the_viewer_sees_it(serve, demo):
    """A write from the viewer does not stop the agent appending; another writer's appends show on the next read."""
    from sessiontree import JsonlSessionStorage, Session, UserMessage

    server = serve(demo["repo"])
    sid = demo["session_id"]
    body = json.dumps({"entry": demo["ids"]["diagnosis"], "label": "seen"}).encode()
    assert server.request("POST", f"/api/sessions/{sid}/label", body)[0] == 200
    entries = json.loads(server.get(f"/api/sessions/{sid}")[1])["entries"]
    with Session(JsonlSessionStorage.open(demo["file"])) as agent:
        new = agent.append_message(UserMessage(content="one more thing"))
    summary = json.loads(server.get(f"/api/sessions/{sid}")[1])
    assert summary["entries"] == entries + 1 and summary["leaf_id"] == new
    rows = json.loads(server.get(f"/api/sessions/{sid}/tree?start=-1&count=1")[1])["rows"]
    assert rows[0]["id"] == new and rows[0]["leaf"] is True
