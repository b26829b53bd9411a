"""``sessiontree serve`` as a user meets it: its first line, its errors, and that nothing else loads the web stack."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from urllib.parse import urlsplit

from sessiontree_cli_runner import run


def test_the_first_line_is_the_url_with_a_fresh_random_token(serve, demo):
    first, second = serve(demo["repo"]), serve(demo["repo"])
    for server in (first, second):
        parts = urlsplit(server.url)
        assert parts.hostname == "127.0.0.1" and parts.port and parts.path == "/"
        assert len(server.token) >= 32
    assert first.token != second.token and first.base != second.base


def test_a_taken_port_is_a_clear_error(demo):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = run(("serve", "--no-browser", "--port", str(port), "--repo", str(demo["repo"])), demo["repo"].parent, fails=True)
    assert f"port {port} on 127.0.0.1 is already in use" in proc.stderr
    assert proc.stdout == ""


def test_a_missing_repository_fails_before_any_url_is_printed(tmp_path):
    proc = run(("serve", "--no-browser", "--repo", str(tmp_path / "nothing-here")), tmp_path, fails=True)
    assert "no session repository" in proc.stderr and proc.stdout == ""
    proc = run(("serve", "--no-browser", "--port", "70000", "--repo", str(tmp_path)), tmp_path, fails=True)
    assert "--port must be 0..65535" in proc.stderr


def test_only_serve_imports_starlette_and_uvicorn(demo):
    probe = (
        "import json, sys\n"
        "import sessiontree\n"
        "from sessiontree.cli import main\n"
        "for argv in (['ls', '--json'], ['show', '--json'], ['context', '--json'], ['verify'], ['replay', '--to', '3', '--json']):\n"
        "    assert main(argv) == 0, argv\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'playwright'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=demo["repo"].parent, capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_serve_is_listed_in_the_help(tmp_path):
    assert "serve" in run(("--help",), tmp_path).stdout
    text = run(("serve", "--help"), tmp_path).stdout
    assert "--no-browser" in text and "127.0.0.1" in text


def test_ctrl_c_stops_the_server_quietly(serve, demo):
    server = serve(demo["repo"])
    assert server.get("/api/sessions")[0] == 200
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(20) == 0
    assert server.proc.stderr.read() == ""


def test_without_the_web_extra_serve_says_what_to_install(tmp_path):
    probe = ("import sys; sys.modules['starlette'] = None  # as if the extra were not installed\n"
             "from sessiontree.cli import main; sys.exit(main(['serve', '--no-browser']))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == "sessiontree: error: missing_extra: sessiontree serve needs starlette: pip install 'sessiontree[web]'"
