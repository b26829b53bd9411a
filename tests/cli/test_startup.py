"""Fixed costs (issue 19): what a command does not load or build when it does not need it."""

from __future__ import annotations

import json
import subprocess
import sys

from sessiontree import JsonlSessionStorage, Session, UserMessage
from sessiontree.wire.codec import Codec


def test_context_json_never_imports_rich(tmp_path):
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path)) as session:
        session.append_message(UserMessage("hi"))
    # what a reader never needs: rich, the write side's redactor, the archive reader, eventsourcing (its recorders,
    # and its domain module, whose errors only a refused event raises)
    unneeded = ("rich", "sessiontree.content.redaction", "sessiontree.retention.archive",
                "eventsourcing")
    probe = (
        "import sys; from sessiontree.cli import main; status = main(['context', sys.argv[1], '--json']);"
        f"print(json.dumps({{'status': status, 'loaded': sorted(m for m in sys.modules if m.startswith({unneeded!r}))}}))"
    )
    proc = subprocess.run([sys.executable, "-c", "import json; " + probe, str(path)], capture_output=True, text=True,
                          check=True, cwd=tmp_path)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"status": 0, "loaded": []}
    assert '"leaf_id"' in proc.stdout


def test_the_default_redactor_is_made_by_the_first_append(tmp_path):
    """A session that only reads never makes its redactor; the first append does, and redacts with it."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path)) as session:
        session.append_message(UserMessage("hi"))
    probe = (
        "import sys; from sessiontree import JsonlSessionStorage, Session, UserMessage;"
        "s = Session(JsonlSessionStorage.open(sys.argv[1])); s.build_context(); before = 'sessiontree.content.redaction' in sys.modules;"
        "s.append_message(UserMessage('key AKIAIOSFODNN7EXAMPLE')); after = 'sessiontree.content.redaction' in sys.modules;"
        "print(before, after, len(s.redactors), s.build_context().messages[-1].content)"
    )
    proc = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True, cwd=tmp_path)
    before, after, count, text = proc.stdout.split(maxsplit=3)
    assert (before, after, count) == ("False", "True", "1")
    assert "AKIAIOSFODNN7EXAMPLE" not in text and "[REDACTED:" in text
    with Session(JsonlSessionStorage.open(path), redactors=None) as session:  # no redactors: nothing made, nothing changed
        session.append_message(UserMessage("key AKIAIOSFODNN7EXAMPLE"))
        assert session.redactors == () and session.build_context().messages[-1].content == "key AKIAIOSFODNN7EXAMPLE"


def test_reading_resolves_no_writer_structs_and_writing_those_it_uses(tmp_path):
    """The writer looks a class's wire struct up on first use (an attribute of the encoders from then on)."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path)) as session:
        session.append_message(UserMessage("hi"))
    codec = Codec()
    with Session(JsonlSessionStorage.open(path, codec=codec)) as session:
        assert [m.content for m in session.build_context().messages] == ["hi"]
        assert not any(name[0].isupper() for name in vars(codec.encoders))
        session.append_message(UserMessage("again"))
    made = {name for name in vars(codec.encoders) if name[0].isupper()}
    assert "MessageAppended" in made and "AssistantMessage" not in made
    with Session(JsonlSessionStorage.open(path)) as session:  # what the lazily made encoders wrote reads back
        assert [m.content for m in session.build_context().messages] == ["hi", "again"]
