"""The session aggregate, given events / when a command / then events (SPEC 2.3, 2.4).

Commands are functions of the aggregate that return events; :func:`project` folds them in.
The ``Agg`` harness (tests/support/sessiontree_aggkit.py) drives them like methods: each
command's events are folded in and kept for ``then``. Construction, replay and
eventsourcing's protocol are in test_aggregate_replay.py."""

from __future__ import annotations

import pytest
from sessiontree_aggkit import (
    HI,
    T,
    entry,
    given,
    msg,
    refused,
    then,
)

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    BranchSummarized,
    ContextCompacted,
    LabelChanged,
    LeafMoved,
    ModelChanged,
    SessionRenamed,
    ThinkingLevelChanged,
)

# -- appending -----------------------------------------------------------------------------


def test_first_entry_is_a_root():
    """On an empty session a message becomes a root (parent None) and the leaf."""
    agg = given()
    agg.append_message(HI, id="a", timestamp=T)
    assert then(agg) == [msg("a", None)]
    assert agg.leaf_id == "a"


def test_entry_hangs_under_the_current_leaf():
    """An appended entry's parent is the current leaf."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.append_model_change("openai", "gpt-5", id="c", timestamp=T)
    assert then(agg) == [entry(ModelChanged, "c", "b", provider="openai", model_id="gpt-5")]


@pytest.mark.parametrize(
    "command, expected",
    [
        (lambda a: a.append_label_change("a", "keep", id="x", timestamp=T),
         entry(LabelChanged, "x", "a", target_id="a", label="keep")),
        (lambda a: a.append_session_info("demo", id="x", timestamp=T),
         entry(SessionRenamed, "x", "a", name="demo")),
        (lambda a: a.append_thinking_level_change("high", id="x", timestamp=T),
         entry(ThinkingLevelChanged, "x", "a", thinking_level="high")),
    ],
)
def test_labels_names_and_settings_become_the_leaf(command, expected):
    """Every non-leaf entry type, labels and names included, becomes the leaf (as in pi)."""
    agg = given(msg("a", None))
    command(agg)
    assert then(agg) == [expected]
    assert agg.leaf_id == "x"


def test_after_a_leaf_entry_the_next_entry_hangs_under_its_target():
    """Replaying a ``leaf`` entry puts the leaf on its target, so new entries branch there."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    assert agg.leaf_id == "a"
    agg.append_message(HI, id="c", timestamp=T)
    assert then(agg) == [msg("c", "a")]


def test_move_to_records_a_leaf_entry_under_the_old_leaf():
    """``move_to`` appends a ``leaf`` entry whose parent is the old leaf."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.move_to("a", id="l", timestamp=T)
    assert then(agg) == [entry(LeafMoved, "l", "b", target_id="a")]
    assert agg.leaf_id == "a"


def test_move_to_none_goes_before_the_first_entry():
    """Moving to None makes the next entry a new root."""
    agg = given(msg("a", None))
    agg.move_to(None, id="l", timestamp=T)
    agg.append_message(HI, id="r", timestamp=T)
    assert then(agg) == [entry(LeafMoved, "l", "a", target_id=None), msg("r", None)]


def test_branch_summary_hangs_under_the_moved_to_entry():
    """A branch summary after ``move_to`` has the target as parent and ``from_id``."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.move_to("a", id="l", timestamp=T, summary={"summary": "left b", "details": {"k": 1}}, summary_id="s")
    assert then(agg)[1] == entry(
        BranchSummarized, "s", "a", from_id="a", summary="left b", details={"k": 1}
    )
    assert agg.leaf_id == "s"


def test_compaction_may_keep_an_entry_on_the_branch():
    """``first_kept_entry_id`` on the current branch is accepted."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.append_compaction("sum", "b", 100, id="c", timestamp=T)
    assert then(agg) == [
        entry(ContextCompacted, "c", "b", summary="sum", first_kept_entry_id="b", tokens_before=100)
    ]


def test_replay_keeps_a_thinking_level_the_commands_refuse():
    """A level outside the list is refused on append but kept when read from a log."""
    agg = given(entry(ThinkingLevelChanged, "t", None, thinking_level="ludicrous"))
    assert agg.log.get(0).thinking_level == "ludicrous"
    refused(agg, "invalid_entry", lambda: agg.append_thinking_level_change("ludicrous", id="u", timestamp=T))


# -- invariants (SPEC 2.3) -----------------------------------------------------------------


def test_label_target_must_exist():
    """A label on an unknown entry is refused with not_found naming the id."""
    agg = given(msg("a", None))
    error = refused(agg, "not_found", lambda: agg.append_label_change("zz", "x", id="l", timestamp=T))
    assert "'zz'" in str(error)


def test_label_target_may_be_on_another_branch():
    """Labels may target any existing entry, not only the current branch."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    agg.append_label_change("b", "other branch", id="x", timestamp=T)
    assert then(agg)[0].target_id == "b"


def test_move_to_target_must_exist():
    """``move_to`` an unknown entry is refused with not_found naming the id."""
    agg = given(msg("a", None))
    error = refused(agg, "not_found", lambda: agg.move_to("nope", id="l", timestamp=T))
    assert "'nope'" in str(error)


def test_move_to_a_leaf_record_is_refused():
    """``leaf`` entries are side records, so the leaf cannot move onto one."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    error = refused(agg, "invalid_entry", lambda: agg.move_to("l", id="m", timestamp=T))
    assert "'l'" in str(error)


def test_compaction_keeping_an_off_branch_entry_is_refused():
    """``first_kept_entry_id`` on another branch is refused with invalid_entry."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    error = refused(agg, "invalid_entry", lambda: agg.append_compaction("s", "b", 1, id="c", timestamp=T))
    assert "'b'" in str(error)


def test_compaction_keeping_an_unknown_entry_is_not_found():
    """``first_kept_entry_id`` naming no entry is refused with not_found."""
    agg = given(msg("a", None))
    error = refused(agg, "not_found", lambda: agg.append_compaction("s", "ghost", 1, id="c", timestamp=T))
    assert "'ghost'" in str(error)


def test_thinking_level_outside_the_list_is_refused():
    """Only off, minimal, low, medium, high and xhigh may be appended."""
    agg = given()
    error = refused(agg, "invalid_entry", lambda: agg.append_thinking_level_change("max", id="t", timestamp=T))
    assert "'max'" in str(error)


def test_an_id_in_use_is_refused():
    """A command given an id already in the log raises already_exists."""
    agg = given(msg("a", None))
    refused(agg, "already_exists", lambda: agg.append_message(HI, id="a", timestamp=T))


def test_replay_refuses_duplicate_ids():
    """A log with one id twice is corrupt."""
    with pytest.raises(SessionError) as caught:
        given(msg("a", None), msg("a", "a"))
    assert caught.value.code == "corrupt"
    assert "'a'" in str(caught.value)


def test_branch_summary_from_an_unknown_entry_is_refused():
    """A branch summary must come from an existing entry (or the pseudo-root ``root``, a move
    before the first entry)."""
    agg = given(msg("a", None))
    refused(agg, "not_found", lambda: agg.move_to("zz", id="l", timestamp=T, summary={"summary": "s"}, summary_id="s"))
    agg.move_to(None, id="l", timestamp=T, summary={"summary": "s"}, summary_id="s")
    assert then(agg)[1].from_id == "root"


@pytest.mark.parametrize(
    "command",
    [
        lambda a: a.append_message("hello", id="x", timestamp=T),
        lambda a: a.append_thinking_level_change(3, id="x", timestamp=T),
        lambda a: a.append_model_change("p", None, id="x", timestamp=T),
        lambda a: a.append_active_tools_change("bash", id="x", timestamp=T),
        lambda a: a.append_active_tools_change(["bash", 7], id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, "100", id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, True, id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, 1, retained_tail=["hi"], id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, 1, usage={"input": 1}, id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, 1, from_hook="no", id="x", timestamp=T),
        lambda a: a.append_custom_entry(None, {}, id="x", timestamp=T),
        lambda a: a.append_custom_message_entry("t", 5, id="x", timestamp=T),
        lambda a: a.append_custom_message_entry("t", "c", display="yes", id="x", timestamp=T),
        lambda a: a.append_label_change(1, "x", id="x", timestamp=T),
        lambda a: a.append_label_change("a", 1, id="x", timestamp=T),
        lambda a: a.append_session_info(["n"], id="x", timestamp=T),
        lambda a: a.move_to(1, id="x", timestamp=T),
    ],
)
def test_wrong_types_are_type_errors_and_append_nothing(command):
    """A wrong argument type is a TypeError and no event is triggered."""
    agg = given(msg("a", None))
    with pytest.raises(TypeError):
        command(agg)
    assert len(agg.log) == 1 and agg.collect_events() == []


@pytest.mark.parametrize(
    "command",
    [
        lambda a: a.append_model_change("", "m", id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, -1, id="x", timestamp=T),
        lambda a: a.append_custom_entry("", None, id="x", timestamp=T),
        lambda a: a.append_custom_message_entry("", "c", id="x", timestamp=T),
    ],
)
def test_invalid_values_are_refused(command):
    """Empty names and negative token counts are invalid_entry."""
    agg = given(msg("a", None))
    refused(agg, "invalid_entry", lambda: command(agg))
