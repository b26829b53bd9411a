"""The example app projection: files touched by the agent's tool calls."""

from __future__ import annotations

import pytest
import sessiontree_testkit as kit

from sessiontree import Session, ToolCall
from sessiontree.projections.base import fold
from sessiontree.projections.examples import FileActivity, FilesTouchedProjection


def call(name, **arguments):
    return ToolCall(id=f"c-{name}", name=name, arguments=arguments)


def working_session():
    s = kit.open_session(projections=[FilesTouchedProjection()])
    s.append_message(kit.user("fix the bug"))
    first = s.append_message(kit.assistant("looking", tool_calls=[call("read", path="app.py"), call("bash", command="ls")]))
    s.append_message(kit.tool_result("c-read", "read", "..."))
    second = s.append_message(kit.assistant("fixing", tool_calls=[call("edit", file_path="app.py"), call("write", path="test_app.py")]))
    return s, first, second


def test_reads_and_writes_are_counted_per_file():
    """Read tools count as reads, write/edit tools as writes; calls naming no file are ignored."""
    s, first, second = working_session()
    assert s.projection("files_touched") == {
        "app.py": FileActivity(reads=1, writes=1, first_entry_id=first, last_entry_id=second),
        "test_app.py": FileActivity(reads=0, writes=1, first_entry_id=second, last_entry_id=second),
    }


def test_files_touched_on_every_branch_count():
    """Moving away from a branch does not undo what its tool calls did to files."""
    s, _, _ = working_session()
    s.move_to(s.get_entries()[0].id)
    assert set(s.projection("files_touched")) == {"app.py", "test_app.py"}


def test_files_touched_in_time_travel_and_after_reopening():
    """Views and a reopened session give the same answer as a fold over the log."""
    s, _, _ = working_session()
    assert list(s.at(3).projection("files_touched")) == ["app.py"]
    reopened = Session(s.storage, projections=[FilesTouchedProjection()])
    assert reopened.projection("files_touched") == s.projection("files_touched")
    assert fold(FilesTouchedProjection(), s.get_entries()) == s.projection("files_touched")


def test_path_keys_and_write_tools_are_configurable():
    """Apps choose which argument names hold paths and which tools write."""
    s = kit.open_session(projections=[FilesTouchedProjection("touched", path_keys=["target"], write_tools=["apply_patch"])])
    s.append_message(kit.assistant("", tool_calls=[call("apply_patch", target="a.py", path="ignored.py")]))
    assert s.projection("touched") == {"a.py": FileActivity(writes=1, first_entry_id="00000001", last_entry_id="00000001")}


def test_a_bad_name_is_refused():
    """The projection's name must be a non-empty string."""
    with pytest.raises(TypeError):
        FilesTouchedProjection("")
