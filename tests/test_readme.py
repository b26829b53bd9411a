"""The README's quickstart runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_quickstart_runs_and_runs_again(tmp_path, monkeypatch):
    """Every ```python block of the README executes, in order, in a scratch directory; run again, it works again (a
    new session each time, not ``already_exists``)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has a quickstart"
    monkeypatch.chdir(tmp_path)
    ids = []
    for _ in range(2):
        namespace: dict = {}
        for block in blocks:
            exec(compile(block, str(README), "exec"), namespace)
        assert namespace["reopened"].build_context() == namespace["context"]
        ids.append(namespace["session"].id)
        namespace["session"].close()
        namespace["reopened"].close()
    assert ids[0] != ids[1] and len(list((tmp_path / ".sessions").glob("*.jsonl"))) == 2


def _readme_commands() -> list[list[str]]:
    """The ``sessiontree`` lines of the README's command list, as the shell splits them (comments dropped)."""
    import shlex

    block = re.search(r"```sh\n(sessiontree demo .*?)```", README.read_text(), re.S)
    assert block, "the README lists the commands"
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line.startswith("sessiontree ")]


def test_readme_command_list_runs_top_to_bottom_on_a_fresh_demo(tmp_path):
    """Every line of the README's command list runs, in order, in an empty directory (with a pi sessions folder in
    ``~``, as `import ~/.pi/agent/sessions` expects); `serve` serves its page until stopped (issue 37, item 3)."""
    import json
    import subprocess
    import sys
    import urllib.request

    sys.path[:0] = [str(README.parent / "tests" / "cli"), str(README.parent / "tests" / "support")]
    import sessiontree_pi as pi
    from sessiontree_cli_runner import SCRIPT, _env, run

    home = tmp_path / "home"
    folder = home / ".pi" / "agent" / "sessions" / "--home-me-app--"
    folder.mkdir(parents=True)
    pi.write_lines(folder / f"2026-01-01T00-00-00-000Z_{pi.SESSION_ID}.jsonl", [
        pi.pi_header(cwd="/home/me/app"), pi.pi_node("message", "a1", None, message=pi.user_msg("hello from pi"))])
    work = tmp_path / "work"
    work.mkdir()
    steps = _readme_commands()
    assert [s[0] for s in steps][:2] == ["sessiontree"] * 2 and steps[-1][1] == "serve"
    for step in steps[:-1]:
        args = tuple(a.replace("~", str(home), 1) if a.startswith("~/") else a for a in step[1:])
        proc = run(args, work, HOME=str(home))
        assert "warning" not in proc.stderr or args[0] in ("export", "import"), (args, proc.stderr)
    listing = json.loads(run(("ls", "--json"), work).stdout)
    assert len(listing) == 3 and listing[0]["parent_session"] and listing[0]["forked_at"]  # the fork is the newest
    assert (work / "branch.md").is_file()
    server = subprocess.Popen([SCRIPT, *steps[-1][1:]], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=_env(HOME=str(home), BROWSER="true"))
    try:
        url = server.stdout.readline().strip() if server.stdout else ""
        assert url.startswith("http://127.0.0.1:"), (url, server.poll())
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the token becomes a cookie
        with opener.open(url, timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        server.terminate()
        server.wait(timeout=30)
