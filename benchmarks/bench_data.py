"""The benchmark's session files: the same ``bench`` shape in pi's dialect and in the native one.

With node and the pi peer harness (scripts/install-pi-peer.sh), pi 1.6.0 writes the pi
file itself (``pi-peer.mjs gen --shape bench``) and the native file is its conversion by
:func:`sessiontree.pi.pi_convert.import_pi` (same entries, same ids). Without
node, :func:`generate_native` writes an equivalent native file through the ``Session``
API (same entry count and mix: 4-entry turns, a label every ~1k entries, a compaction every
~20k, a branch summary every ~25k, one name, ``custom`` padding) and ``export_pi`` gives
the pi file.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

PI_PACKAGE = ("@earendil-works", "pi-coding-agent")


def pi_peer_home() -> Path:
    """Where scripts/install-pi-peer.sh put the harness (``$SESSIONTREE_PI_PEER``)."""
    configured = os.environ.get("SESSIONTREE_PI_PEER")
    if configured:
        return Path(configured)
    return Path(os.environ.get("TMPDIR") or "/tmp") / "sessiontree-pi-peer"


def pi_available(home: Path | None = None) -> str | None:
    """Why pi cannot be driven here, or None when node and pi 1.6.0 are installed."""
    home = home or pi_peer_home()
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not (home / "pi-peer.mjs").is_file():
        return f"no pi peer harness in {home} (run scripts/install-pi-peer.sh)"
    if not (home / "latest" / "node_modules" / Path(*PI_PACKAGE) / "package.json").is_file():
        return f"pi 1.6.0 is not installed under {home / 'latest'} (run scripts/install-pi-peer.sh)"
    return None


def pi_version(home: Path | None = None) -> str:
    home = home or pi_peer_home()
    data = json.loads((home / "latest" / "node_modules" / Path(*PI_PACKAGE) / "package.json").read_text())
    return f"{'/'.join(PI_PACKAGE)}@{data['version']}"


def generate_pi(path: Path, entries: int, home: Path | None = None, seed: int = 42) -> dict[str, Any]:
    """Let pi 1.6.0 write a ``bench`` session of ``entries`` entries at ``path``."""
    home = home or pi_peer_home()
    cmd = [
        "node", str(home / "pi-peer.mjs"), "gen", str(path), "--shape", "bench",
        "--entries", str(entries), "--seed", str(seed), "--pkg", "latest",
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


# -- the fallback generator (no node): the same shape through sessiontree's Session API ------

_WORDS = (
    "alpha branch cache delta entry field graph hash index json kernel label merge node offset parent query record "
    "schema token update value write yield zone compaction summary leaf tool"
).split()


class _Content:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clock = 1_768_467_600_000  # 2026-01-15T09:00:00Z in ms
        self.calls = 0

    def words(self, lo: int, hi: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(lo, hi)))

    def tick(self) -> int:
        self.clock += self.rng.randint(200, 4000)
        return self.clock

    def usage(self) -> Any:
        from sessiontree import Cost, Usage

        i, o, cr, cw = (self.rng.randint(50, 3000), self.rng.randint(20, 800),
                        self.rng.randint(0, 40000), self.rng.randint(0, 2000))
        ci, co, ccr, ccw = i * 3e-6, o * 15e-6, cr * 3e-7, cw * 3.75e-6
        cost = Cost(input=ci, output=co, cache_read=ccr, cache_write=ccw, total=ci + co + ccr + ccw)
        return Usage(input=i, output=o, cache_read=cr, cache_write=cw, total_tokens=i + o + cr + cw, cost=cost)

    def turn(self) -> list[Any]:
        from sessiontree import (
            AssistantMessage,
            TextContent,
            ThinkingContent,
            ToolCall,
            ToolResultMessage,
            UserMessage,
        )

        self.calls += 1
        call_id = f"toolu_{self.calls:06d}"
        user = UserMessage(content=[TextContent(text=f"Please {self.words(6, 20)}.")], timestamp=self.tick())

        def assistant(tool: bool) -> Any:
            blocks: list[Any] = [
                ThinkingContent(thinking=self.words(5, 25), signature=f"sig_{self.rng.randint(100000, 900000)}"),
                TextContent(text=self.words(8, 40)),
            ]
            if tool:
                blocks.append(ToolCall(id=call_id, name="read", arguments={"path": f"src/{self.rng.choice(_WORDS)}.ts"}))
            return AssistantMessage(
                content=blocks, provider="anthropic", model="claude-sonnet-4-5", api="anthropic-messages",
                usage=self.usage(), stop_reason="toolUse" if tool else "stop", timestamp=self.tick(),
            )

        first = assistant(True)
        result = ToolResultMessage(
            tool_call_id=call_id, tool_name="read", content=[TextContent(text=self.words(10, 60))],
            timestamp=self.tick(),
        )
        return [user, first, result, assistant(False)]


def generate_native(path: Path, entries: int, seed: int = 42) -> dict[str, Any]:
    """Write a native ``bench``-shaped session of exactly ``entries`` entries at ``path``."""
    from sessiontree import JsonlSessionStorage, Session

    syn = _Content(seed)
    session = Session(JsonlSessionStorage.create(path, cwd="/home/user/project"))
    try:
        session.append_model_change("anthropic", "claude-sonnet-4-5")
        session.append_thinking_level_change("medium")
        count = 2
        recent: list[list[str]] = []
        named = False
        while count < entries - 4:
            ids = [session.append_message(msg) for msg in syn.turn()]
            count += 4
            recent = (recent + [ids])[-50:]
            if count % 1000 < 4 and count < entries - 8:
                session.append_label_change(ids[0], f"mark-{count}")
                count += 1
            if not named and count > entries / 2:
                session.append_session_info("Benchmark session")
                named = True
                count += 1
            if count % 20000 < 4 and count < entries - 8:
                keep = recent[max(0, len(recent) - 10)][0]
                session.append_compaction(f"## Goal\n{syn.words(20, 20)}", keep, 150000 + count)
                count += 1
            if count % 25000 < 5 and count < entries - 8 and len(recent) > 20:
                # a leaf move plus its summary: two entries here (pi writes the move implicitly)
                session.move_to(recent[-20][3], summary={"summary": f"## Goal\n{syn.words(15, 15)}"})
                count += 2
        while count < entries:
            session.append_custom_entry("bench/pad", {"n": count})
            count += 1
        return {"file": str(path), "entries": len(session), "bytes": path.stat().st_size}
    finally:
        session.close()


def prepare(data: Path, sizes: list[int], use_pi: bool, log: Any = print) -> dict[int, dict[str, Path]]:
    """``{N: {"pi": path, "native": path}}`` for every size, made once per data directory."""
    from sessiontree.pi.pi_convert import export_pi, import_pi

    data = data / ("made-by-pi" if use_pi else "made-by-sessiontree")
    data.mkdir(parents=True, exist_ok=True)
    out: dict[int, dict[str, Path]] = {}
    for n in sizes:
        pi_file, native_file = data / f"pi-{n}.jsonl", data / f"native-{n}.jsonl"
        if use_pi:
            if not pi_file.exists():
                log(f"  generating pi-{n}.jsonl with pi 1.6.0")
                generate_pi(pi_file, n)
            if not native_file.exists():
                log(f"  converting it to native-{n}.jsonl (import_pi)")
                import_pi(pi_file, native_file)
        else:
            if not native_file.exists():
                log(f"  generating native-{n}.jsonl through the Session API")
                generate_native(native_file, n)
            if not pi_file.exists():
                log(f"  converting it to pi-{n}.jsonl (export_pi)")
                export_pi(native_file, pi_file)
        out[n] = {"pi": pi_file, "native": native_file}
    return out


def write_list_sessions(directory: Path, count: int) -> None:
    """``count`` small sessions (10 entries) in ``directory``, by helper ``bench_list.py``."""
    import bench_list

    from sessiontree import open_repo

    shutil.rmtree(directory, ignore_errors=True)
    repo = open_repo(directory)
    try:
        bench_list.write_sessions(repo, count, 10)
    finally:
        repo.close()


def main(argv: list[str]) -> None:
    """``bench_data.py files DIR N,N,... pi|no-pi`` or ``bench_data.py sessions DIR COUNT``
    (run.py calls these in a child process, so its own memory stays small)."""
    import sys

    if argv[0] == "files":
        prepare(Path(argv[1]), [int(n) for n in argv[2].split(",")], argv[3] == "pi",
                log=lambda m: print(m, file=sys.stderr, flush=True))
    elif argv[0] == "sessions":
        write_list_sessions(Path(argv[1]), int(argv[2]))
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
