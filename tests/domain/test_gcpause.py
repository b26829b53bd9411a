"""The collector pause around bulk loads: paused inside, restored after, and a big load frozen."""

import gc

from sessiontree.domain import gcpause
from sessiontree.domain.gcpause import building_many


def _make(count):
    return [[] for _ in range(count)]  # lists: always tracked by the cyclic collector (empty dicts are not)


def test_the_collector_is_paused_inside_and_restored_after():
    """Given the collector on, it is off inside ``building_many`` and on again after, even on error."""
    assert gc.isenabled()
    with building_many():
        assert not gc.isenabled()
    assert gc.isenabled()
    try:
        with building_many():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    """An application that turned the collector off keeps it off."""
    gc.disable()
    try:
        with building_many():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_big_load_is_frozen_and_a_small_one_is_not(monkeypatch):
    """Many new tracked objects are moved to the permanent generation; a few are not; FREEZE=False never."""
    gc.unfreeze()
    gc.collect()
    base = gc.get_freeze_count()  # 0, but CPython 3.12 keeps a few of its own objects there
    with building_many():
        kept = _make(gcpause.FREEZE_AFTER // 10)
    assert gc.get_freeze_count() == base
    with building_many():
        kept += _make(gcpause.FREEZE_AFTER + 10)
    assert gc.get_freeze_count() >= base + gcpause.FREEZE_AFTER
    gc.unfreeze()
    gc.collect()
    base = gc.get_freeze_count()
    monkeypatch.setattr(gcpause, "FREEZE", False)
    with building_many():
        kept += _make(gcpause.FREEZE_AFTER + 10)
    assert gc.get_freeze_count() == base
    del kept


def _young(obj):
    return any(o is obj for gen in (0, 1) for o in gc.get_objects(generation=gen))


def test_settle_passes_a_large_new_list_through_the_young_generations():
    """A large list just made leaves the young generations at once; a small one, or any
    list while the application has the collector off, is left to the collector."""
    big = list(range(gcpause.SETTLE_AFTER))
    small = list(range(gcpause.SETTLE_AFTER - 1))
    assert _young(big) and _young(small)
    gcpause.settle(len(small))
    assert _young(small)
    gc.disable()
    try:
        gcpause.settle(len(big))
        assert _young(big)
    finally:
        gc.enable()
    gcpause.settle(len(big))
    assert not _young(big)


def test_a_session_settles_the_context_it_keeps_for_appends(monkeypatch):
    """The context a session keeps (and extends on append) goes to settle with its entry
    count; a view's context (time travel, read-only) does not."""
    import sessiontree_testkit as kit

    from sessiontree import session as session_module

    calls = []
    monkeypatch.setattr(session_module, "settle", calls.append)
    session = kit.open_session()
    for i in range(3):
        session.append_message(kit.user(f"m{i}"))
    session.at(2).build_context()
    assert calls == []
    session.build_context()
    session.build_context()  # kept: not settled again
    assert calls == [3]
