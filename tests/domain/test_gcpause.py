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
    with building_many():
        kept = _make(gcpause.FREEZE_AFTER // 10)
    assert gc.get_freeze_count() == 0
    with building_many():
        kept += _make(gcpause.FREEZE_AFTER + 10)
    assert gc.get_freeze_count() >= gcpause.FREEZE_AFTER
    gc.unfreeze()
    monkeypatch.setattr(gcpause, "FREEZE", False)
    with building_many():
        kept += _make(gcpause.FREEZE_AFTER + 10)
    assert gc.get_freeze_count() == 0
    del kept
