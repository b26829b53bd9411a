"""Huge session text in the human views: clipped with a marker, whole with ``--full``; exports that cannot inject
markup; ``replay --step`` laid out as before."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import sessiontree_pi as pi
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from sessiontree_cli_runner import SCRIPT

from sessiontree import (
    AssistantMessage,
    JsonlSessionStorage,
    Session,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiontree.cli import mdescape

BOUND = 64_000  # bytes of stdout any view may print for one huge block


def _lines(count: int, width: int = 50) -> str:
    """``count`` numbered lines of ``width`` characters each, newline included."""
    return "".join(f"line {i:05d} ".ljust(width - 1, "z") + "\n" for i in range(count))


def _pi_file(path: Path, output: str) -> Path:
    call = {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": "cat"}}],
            "api": "a", "provider": "p", "model": "m", "stopReason": "toolUse", "timestamp": 2}
    result = {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": [{"type": "text", "text": output}],
              "isError": False, "timestamp": 3}
    return pi.write_lines(path, [
        pi.pi_header(),
        pi.pi_node("message", "a1", None, message=pi.user_msg("run it")),
        pi.pi_node("message", "a2", "a1", message=call),
        pi.pi_node("message", "a3", "a2", message=result),
        pi.pi_node("message", "a4", "a3", message=pi.assistant_msg("done", 4)),
    ])


def _native(path: Path, *, cwd: str, name: str, label: str, output: str, argument: str) -> Path:
    session = Session(JsonlSessionStorage.create(path, cwd=cwd))
    ask = session.append_message(UserMessage(content="run it", timestamp=1))
    session.append_message(AssistantMessage(content=[ToolCall(id="t1", name="bash", arguments={"content": argument})],
                                            provider="p", model="m", stop_reason="tool_use", timestamp=2))
    session.append_message(ToolResultMessage(tool_call_id="t1", tool_name="bash", content=[TextContent(text=output)],
                                             timestamp=3))
    session.append_label_change(ask, label)
    session.append_session_info(name)
    session.close()
    return path


def _has_full(cli: Any, command: str) -> bool:
    return "--full" in cli(command, "--help").stdout


def test_context_cuts_a_multi_megabyte_single_line_of_a_pi_file(cli, tmp_path: Path) -> None:
    """A tool output of one 5 MB line shows its first 4,000 characters and how many were left out; --json keeps it."""
    path = _pi_file(tmp_path / "pi.jsonl", "0123456789" * 500_000)
    out = cli("context", str(path)).stdout
    assert "… 4,996,000 more characters (--full shows all)" in out
    assert len(out.encode()) < BOUND
    assert "#4 assistant" in out and "done" in out  # the messages after it are shown too
    payload = json.loads(cli("context", str(path), "--json").stdout)
    assert len(payload["messages"][2]["content"][0]["text"]) == 5_000_000


def test_every_human_view_bounds_huge_session_text(cli, tmp_path: Path) -> None:
    """A 1 MB cwd, 100 KB name and label, a 1 MB tool argument and a 3 MB tool output: every view prints a bounded
    amount, saying how much it left out."""
    path = _native(tmp_path / "huge.jsonl", cwd="/" + "d" * 1_000_000, name="N" * 100_000, label="L" * 100_000,
                   output=_lines(60_000), argument="y" * 1_000_000)
    views = {
        "show": ("show", str(path), "--filter", "all"),
        "context": ("context", str(path)),
        "stats": ("stats", str(path)),
        "step": ("replay", "--step", str(path)),
        "replay": ("replay", "--to", "4", str(path)),
        "markdown": ("export", "--format", "markdown", str(path)),
        "html": ("export", "--format", "html", str(path)),
    }
    outs = {key: cli(*args).stdout for key, args in views.items()}
    for key, out in outs.items():
        assert len(out.encode()) < BOUND, f"{key} printed {len(out.encode()):,} bytes"
    assert "… (999,801 more characters)" in outs["stats"]  # the cwd: its first 200 characters and a count
    assert "'… (99,800 more characters)" in outs["stats"]  # the name
    assert "… (99,800 more characters)]`" in outs["markdown"]  # the label
    assert "line 00011" in outs["context"] and "line 00012" not in outs["context"]
    assert "… 2,999,400 more characters, 59,988 more lines (--full shows all)" in outs["context"]
    assert "… 2,990,000 more characters, 59,800 more lines (--full shows all)" in outs["markdown"]
    assert "line 00199" in outs["html"] and "line 00200" not in outs["html"]


def test_context_full_shows_a_whole_block(cli, tmp_path: Path) -> None:
    """``--full`` prints every line of a 200 KB tool output, and no marker."""
    path = _pi_file(tmp_path / "pi.jsonl", _lines(4_000))
    out = cli("context", str(path), "--full").stdout
    assert len(re.findall(r"line \d{5} z+", out)) == 4_000
    assert "more characters" not in out


def test_show_replay_and_export_take_full(cli, tmp_path: Path) -> None:
    """``--full`` on show, replay and export shows names, paths and blocks whole."""
    for command in ("show", "replay", "export"):
        assert _has_full(cli, command), f"`sessiontree {command}` has no --full option"
    cwd = "/" + "d" * 50_000
    path = _native(tmp_path / "s.jsonl", cwd=cwd, name="n", label="l", output=_lines(4_000), argument="y")
    assert cwd in cli("show", str(path), "--full").stdout.replace("\n", "")  # folded over lines, all of it
    assert cwd in cli("replay", "--to", "3", str(path), "--full").stdout.replace("\n", "")
    markdown = cli("export", "--format", "markdown", str(path), "--full").stdout
    assert len(re.findall(r"line \d{5} z+", markdown)) == 4_000


def _evil(path: Path) -> Path:
    session = Session(JsonlSessionStorage.create(path, cwd="/w"))
    ask = session.append_message(UserMessage(
        content="<script>alert(1)</script> and </details> and `Vec<String>`\n\n```html\n<div>kept</div>\n```", timestamp=1))
    session.append_message(AssistantMessage(content=[
        ThinkingContent(thinking="</details><img src=x onerror=alert(1)>"),
        TextContent(text="x `\n` <img src=x onerror=alert(2)> `\n\n- item\n\n  ```\n<img src=x onerror=alert(3)>\n  ```"),
        ToolCall(id="t1", name="<b>tool</b>", arguments={"html": "<script>in code</script>"}),
    ], provider="p", model="<i>model</i>", stop_reason="tool_use", timestamp=2))
    session.append_message(ToolResultMessage(tool_call_id="t1", tool_name="<b>tool</b>",
                                             content=[TextContent(text="<script>out</script>\n```\n<img src=y>")], timestamp=3))
    session.append_label_change(ask, "<b>bold</b> `tick`")
    session.append_session_info("<h1>Name</h1>")
    session.close()
    return path


def test_exports_cannot_inject_markup(cli, tmp_path: Path) -> None:
    """Markup in messages, names, labels and tool names shows as typed: rendered, the Markdown export has no element
    the session wrote, and keeps its code; the HTML export escapes it all."""
    path = _evil(tmp_path / "evil.jsonl")
    markdown = cli("export", "--format", "markdown", str(path)).stdout
    rendered = MarkdownIt("commonmark").render(markdown)
    for element in ("<script", "<img", "<b>", "<i>", "<div"):
        assert element not in rendered, f"{element} in {rendered}"
    assert rendered.count("<details>") == rendered.count("</details>") == 1  # the export's own thinking block
    assert rendered.count("<h1>") == 1 and "&lt;h1&gt;Name&lt;/h1&gt;" in rendered
    assert "<code>Vec&lt;String&gt;</code>" in rendered
    assert "&lt;div&gt;kept&lt;/div&gt;" in rendered and "&lt;script&gt;out&lt;/script&gt;" in rendered
    body = cli("export", "--format", "html", str(path)).stdout.split("<body>", 1)[1]
    for element in ("<script", "<img", "<b>bold", "<b>tool", "<i>", "<div"):
        assert element not in body, element
    assert body.count("<h1>") == 1 and body.count("</details>") == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_a_lone_carriage_return_cannot_open_a_fence_that_lets_a_later_message_through(cli, tmp_path: Path) -> None:
    """CommonMark ends a line at a lone CR: a fence after one opens a code block for the reader, so the export must
    see it too, or the block swallows the export's own heading and a later tool output's HTML becomes live."""
    with Session(JsonlSessionStorage.create(tmp_path / "cr.jsonl", cwd="/x")) as session:
        session.append_message(UserMessage("list the files"))
        session.append_message(AssistantMessage([ToolCall(id="c1", name="bash", arguments={"cmd": "ls"}),
                                                 ThinkingContent("hm\r```"), TextContent("Running it now.\r```")]))
        session.append_message(ToolResultMessage([TextContent("<script>alert(document.domain)</script>")],
                                                  tool_call_id="c1", tool_name="bash"))
    rendered = MarkdownIt("commonmark").render(cli("export", "--format", "markdown", "cr.jsonl").stdout)
    assert "<script" not in rendered and "&lt;script&gt;alert(document.domain)&lt;/script&gt;" in rendered
    assert rendered.count("<details>") == rendered.count("</details>") == 1


# Pieces that open HTML, code and block structure in CommonMark, to build messages from.
MARKUP = ["<x>", "</x>", "<!--", "<?", "<![CDATA[", "<http://x>", "<script>", "<pre>", "<details>", "</details>", "`",
          "``", "```", "````", "```x`", "~~~", "   ```", "\n", "\n\n", " ", "    ", "\t", "\\", "- ", "1. ", "> ", "#",
          "*", "_", "[a]", "(b)", "&lt;", "&", "<", "/", "a", "x", "\r", "\r\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(MARKUP), max_size=40).map("".join))
def test_no_message_renders_markup_of_its_own(text: str) -> None:
    """Whatever a message holds, its Markdown renders no element it wrote (only the renderer's own paragraphs, lists,
    code and emphasis), however its code spans and fences pair up."""
    rendered = MarkdownIt("commonmark").render(mdescape.message(text))
    assert not re.search(r"<x>|</x>|<!--|<\?|<!\[CDATA\[|<http|<script|<pre>(?!<code)|<details|</details", rendered)


# ``replay --step --from 18 --to 36`` of the demo at 100 columns (times masked): the event last, cut to the width.
STEP_ROWS = """\
 #   time       leaf         context msgs            event
────────────────────────────────────────────────────────────────────────────────────────────────────
18   hh:mm:ss                +1 tool_result = 11     06d002db tool_result bash error: 1 failed, 49 …
19   hh:mm:ss                +1 assistant = 12       1414f6b5 assistant (gpt-5-mini): Still one fai…
20   hh:mm:ss   → 651011cb   -6 = 6                  7b885975 leaf: moved to 651011cb
21   hh:mm:ss                +1 branch_summary = 7   25318bf2 branch_summary: Tried B (sleep 1.2 s …
22   hh:mm:ss                +1 user = 8             0d99ed20 user: Revert that and do A: inject a …
23   hh:mm:ss                +1 assistant = 9        3d3db70b assistant (claude-sonnet-4-5): Readin…
24   hh:mm:ss                +1 tool_result = 10     60ca36fe tool_result read: class TTLCache: def…
25   hh:mm:ss                +1 assistant = 11       87a152f4 assistant (claude-sonnet-4-5): `TTLCa…
26   hh:mm:ss                +1 tool_result = 12     83f614dc tool_result edit: Edited src/cache.py…
27   hh:mm:ss                +1 assistant = 13       167dd69a assistant (claude-sonnet-4-5): The te…
28   hh:mm:ss                +1 tool_result = 14     c9374388 tool_result edit: Edited tests/test_c…
29   hh:mm:ss                +1 assistant = 15       e7fb3f46 assistant (claude-sonnet-4-5): Runnin…
30   hh:mm:ss                +1 tool_result = 16     a434d6f9 tool_result bash: 200 passed in 0.41s
31   hh:mm:ss                +1 assistant = 17       fda536a3 assistant (claude-sonnet-4-5): 200 of…
32   hh:mm:ss                ·                       6cd44f91 label: fda536a3 = 'fixed'
33   hh:mm:ss                ·                       9d461576 custom: git-checkpoint {"commit": "3f…
34   hh:mm:ss                -17 +12 = 12            0131d9b6 compaction: 14,672 tokens before · Th…
35   hh:mm:ss                +1 user = 13            9d97fce6 user: Great. Add a line to CHANGELOG.…
36   hh:mm:ss                +1 assistant = 14       9059e86a assistant (claude-sonnet-4-5): Adding…
"""


def test_replay_step_rows_are_laid_out_as_a_table(demo, tmp_path: Path) -> None:
    """The hand-made step table is laid out column for column, the event last (issue 37: piped, it pads no row)."""
    env = {**os.environ, "COLUMNS": "100"}
    env.pop("SESSIONTREE_REPO", None)
    done = subprocess.run([SCRIPT, "replay", "--step", "--from", "18", "--to", "36"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    lines = [re.sub(r"\d\d:\d\d:\d\d", "hh:mm:ss", line.rstrip()) for line in done.stdout.splitlines()]
    assert "\n".join(lines) + "\n" == STEP_ROWS


def test_replay_steps_of_a_pi_file_match_and_from_starts_anywhere(demo, cli, cli_json) -> None:
    """Stepping a pi file (context rules of its own, kept incrementally) reports the native file's changes, and
    ``--from``/``--to`` give exactly that slice of the whole run."""
    cli("export", "--format", "pi", "-o", "demo.pi.jsonl")
    keys = ("version", "removed", "added", "context_size", "leaf_after")
    native = [{k: s[k] for k in keys} for s in cli_json("replay", "--step")["steps"]]
    as_pi = [{k: s[k] for k in keys} for s in cli_json("replay", "--step", "demo.pi.jsonl")["steps"]]
    assert as_pi == native
    for start, end in ((1, 5), (20, 34), (35, 40)):
        part = cli_json("replay", "--step", "--from", str(start), "--to", str(end), "demo.pi.jsonl")["steps"]
        assert [{k: s[k] for k in keys} for s in part] == native[start - 1 : end]
    whole = cli("replay", "--step").stdout.splitlines()
    tail = cli("replay", "--step", "--from", "20").stdout.splitlines()
    assert tail[2:] == whole[21:]
