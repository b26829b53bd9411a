"""Fixed costs (issue 19): what a command does not load or build when it does not need it."""

from __future__ import annotations

import json
import subprocess
import sys

from sessiontree import JsonlSessionStorage, Session, UserMessage
from sessiontree.adapters.codec import Codec


def test_context_json_never_imports_rich(tmp_path):
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path)) as session:
        session.append_message(UserMessage("hi"))
    probe = (
        "import sys; from sessiontree.cli import main; status = main(['context', sys.argv[1], '--json']);"
        "print(json.dumps({'status': status, 'rich': sorted(m for m in sys.modules if m.split('.')[0] == 'rich')}))"
    )
    proc = subprocess.run([sys.executable, "-c", "import json; " + probe, str(path)], capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"status": 0, "rich": []}
    assert '"leaf_id"' in proc.stdout


def test_reading_makes_no_encoders_and_writing_makes_those_it_uses(tmp_path):
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path)) as session:
        session.append_message(UserMessage("hi"))
    codec = Codec()
    with Session(JsonlSessionStorage.open(path, codec=codec)) as session:
        assert [m.content for m in session.build_context().messages] == ["hi"]
        assert codec.encoders._by_class == {}
        session.append_message(UserMessage("again"))
    made = {cls.__name__ for cls in codec.encoders._by_class}
    assert "MessageAppended" in made and "AssistantMessage" not in made
    with Session(JsonlSessionStorage.open(path)) as session:  # what the lazily made encoders wrote reads back
        assert [m.content for m in session.build_context().messages] == ["hi", "again"]
