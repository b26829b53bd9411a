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
