"""The ``extra`` that every message, block, usage, cost and entry carries: the fields a producer wrote that this library
does not know, written back unchanged so nothing is ever dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Extra(dict[str, Any]):
    """The ``extra`` of a value read from the wire: its unknown fields, as a plain dict.

    ``absent`` names the known fields (attribute names) the producer left out, and ``nulls`` those it wrote as ``null``
    where the writer of its dialect leaves a None out; writing the value back repeats both, so the line round-trips byte
    for byte. Neither takes part in equality: an ``Extra`` equals the plain dict of the same fields.
    """

    __slots__ = ("absent", "nulls")

    def __init__(self, fields: Any = (), absent: frozenset[str] = frozenset(), nulls: frozenset[str] = frozenset()) -> None:
        super().__init__(fields)
        self.absent = absent
        self.nulls = nulls

    def __reduce__(self) -> Any:  # a copy, a deep copy or a pickle is a plain, writable Extra
        return (Extra, (dict(self), self.absent, self.nulls))


class FrozenExtra(Extra):
    """A read-only ``Extra``, shared by the values that have no unknown fields (rather than an empty dict apiece)."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this extra is shared and read-only; copy it (dict(extra)) to change it")

    # one refusal stands in for every mutator, whatever its signature
    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _read_only


NO_EXTRA: Mapping[str, Any] = FrozenExtra()
"""The ``extra`` of every value with nothing unknown, absent or null (the default)."""
