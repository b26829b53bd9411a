"""A built context's messages: an O(1) snapshot that behaves as a list and never changes under its holder."""

import copy
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree import InMemorySessionStorage, Session, TextContent, UserMessage
from sessiontree.projections.context import ContextMessages, SessionContext


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=0)


def test_a_context_is_not_changed_by_later_appends():
    """Given a built context, when the session appends and builds again, the first one is unchanged."""
    session = Session(InMemorySessionStorage.create(cwd="/p"))
    session.append_message(user("a"))
    first = session.build_context().messages
    session.append_message(user("b"))
    second = session.build_context().messages
    assert [m.content[0].text for m in first] == ["a"]
    assert [m.content[0].text for m in second] == ["a", "b"]
    assert len(first) == 1 and first[-1] == user("a") and first[:] == [user("a")]
    with pytest.raises(IndexError):
        first[1]


def test_changing_a_context_copies_it_and_leaves_the_session_alone():
    """Appending to, sorting or assigning into a context's messages never reaches the session's cache."""
    session = Session(InMemorySessionStorage.create(cwd="/p"))
    session.append_message(user("a"))
    session.append_message(user("b"))
    messages = session.build_context().messages
    messages.append(user("mine"))
    messages[0] = user("changed")
    messages.reverse()
    assert [m.content[0].text for m in messages] == ["mine", "b", "changed"]
    assert session.build_context().messages == [user("a"), user("b")]
    session.append_message(user("c"))
    assert session.build_context().messages == [user("a"), user("b"), user("c")]
    assert [m.content[0].text for m in messages] == ["mine", "b", "changed"]


def test_it_reads_like_a_list():
    """Equality both ways, concatenation, copies, pickling and repr are a list's."""
    items = [user("a"), user("b"), user("c")]
    shared = items + [user("later")]
    snapshot = ContextMessages(shared, 3)
    assert snapshot == items and items == snapshot and snapshot != items[:2]
    assert snapshot + [user("d")] == [*items, user("d")]
    assert [user("z")] + snapshot == [user("z"), *items]
    assert snapshot.copy() == items and isinstance(snapshot.copy(), list)
    assert pickle.loads(pickle.dumps(snapshot)) == items
    assert copy.deepcopy(snapshot) == items
    assert repr(snapshot) == repr(items)
    assert list(reversed(snapshot)) == items[::-1]
    assert snapshot.index(user("b")) == 1 and user("c") in snapshot and user("later") not in snapshot
    assert SessionContext(messages=items).messages == items
    assert snapshot != tuple(items) and not snapshot == tuple(items)  # noqa: SIM201 - __eq__ and __ne__ both
    with pytest.raises(TypeError):
        snapshot + (1,)
    snapshot.extend(snapshot)
    assert snapshot == items + items and shared[:3] == items
    with pytest.raises(TypeError):
        hash(snapshot)
    with pytest.raises(ValueError):
        ContextMessages(items, 4)


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 99)),
        st.tuples(st.just("extend"), st.lists(st.integers(0, 99), max_size=3)),
        st.tuples(st.just("insert"), st.integers(-5, 5), st.integers(0, 99)),
        st.tuples(st.just("pop"), st.integers(-3, 3)),
        st.tuples(st.just("set"), st.integers(-3, 3), st.integers(0, 99)),
        st.tuples(st.just("del"), st.integers(-3, 3)),
        st.tuples(st.just("delslice"), st.integers(-4, 4), st.integers(-4, 4)),
        st.tuples(st.just("sort")),
        st.tuples(st.just("reverse")),
        st.tuples(st.just("clear")),
        st.tuples(st.just("iadd"), st.lists(st.integers(0, 99), max_size=2)),
        st.tuples(st.just("shared_grows"), st.integers(0, 99)),
        st.tuples(st.just("extend_self")),
        st.tuples(st.just("iadd_self")),
        st.tuples(st.just("imul"), st.integers(0, 3)),
    ),
    max_size=12,
)


def _apply(target, op):
    kind = op[0]
    if kind == "append":
        target.append(op[1])
    elif kind == "extend":
        target.extend(op[1])
    elif kind == "insert":
        target.insert(op[1], op[2])
    elif kind == "pop":
        target.pop(op[1])
    elif kind == "set":
        target[op[1]] = op[2]
    elif kind == "del":
        del target[op[1]]
    elif kind == "delslice":
        del target[op[1] : op[2]]
    elif kind == "sort":
        target.sort()
    elif kind == "reverse":
        target.reverse()
    elif kind == "clear":
        target.clear()
    elif kind == "iadd":
        target += op[1]
    elif kind == "extend_self":
        target.extend(target)
    elif kind == "iadd_self":
        target += target
    elif kind == "imul":
        target *= op[1]
    return target


@settings(max_examples=300)
@given(st.lists(st.integers(0, 99), max_size=6), st.integers(0, 6), _ops)
def test_any_sequence_of_list_operations_matches_a_list(items, cut, ops):
    """Any sequence of list operations on a snapshot gives what it gives on a list, errors
    included, and the shared list the snapshot was taken from only ever grows at its end."""
    cut = min(cut, len(items))
    shared = list(items)
    snapshot = ContextMessages(shared, cut)
    model = items[:cut]
    for op in ops:
        if op[0] == "shared_grows":
            shared.append(op[1])  # the session appends to its own list meanwhile
            continue
        outcomes = []
        for target in (model, snapshot):
            try:
                _apply(target, op)
                outcomes.append("ok")
            except IndexError:
                outcomes.append("IndexError")
        assert outcomes[0] == outcomes[1]
        assert list(snapshot) == model and len(snapshot) == len(model)
        assert snapshot == model and [snapshot[i] for i in range(len(model))] == model
        assert snapshot[1:-1] == model[1:-1]
        assert (snapshot < model[:1], snapshot >= model, 2 * snapshot) == (model < model[:1], True, 2 * model)
        assert isinstance(snapshot, ContextMessages)
    assert shared[: len(items)] == items
