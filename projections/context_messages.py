"""The messages of a built context: a list-like snapshot of a list the session keeps."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, MutableSequence
from itertools import islice
from typing import Any


def _comparison(op: Callable[[list[Any], list[Any]], bool]) -> Callable[[ContextMessages, object], bool]:
    """A rich comparison made as a list's: with a list or another snapshot (a tuple is never
    equal, nor ordered), else NotImplemented."""

    def compare(self: ContextMessages, other: object) -> bool:
        if isinstance(other, ContextMessages):
            return op(self._view(), other._view())
        return op(self._view(), other) if isinstance(other, list) else NotImplemented

    return compare


class ContextMessages(MutableSequence[Any]):
    """The messages of a built context: a list-like snapshot, taken in O(1).

    A session keeps the messages of its current context and appends to them as entries are appended. Building the
    context hands out that list and a length instead of a copy: later appends extend the list past the snapshot's end,
    and a rebuild makes a new list, so the snapshot never changes under its holder. It behaves as a list; the first
    change (any list mutator) copies the messages into a list of its own, so the session's list never changes.
    """

    __slots__ = ("_items", "_len", "_own")

    def __init__(self, items: Iterable[Any] = (), length: int | None = None) -> None:
        if isinstance(items, list) and length is not None:
            if not 0 <= length <= len(items):
                raise ValueError(f"length {length} is outside the {len(items)} messages")
            self._own = False  # shared with the session: copy before the first change
        else:
            items = list(items)
            length = len(items)
            self._own = True
        self._items: list[Any] = items
        self._len: int = length

    def _mine(self) -> list[Any]:
        if not self._own:
            self._items = self._items[: self._len]
            self._own = True
        return self._items

    def __len__(self) -> int:
        return len(self._items) if self._own else self._len

    def _view(self) -> list[Any]:
        return self._items if self._own or self._len == len(self._items) else self._items[: self._len]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._view()[index]
        if not self._own:
            if index < 0:
                index += self._len
            if not 0 <= index < self._len:
                raise IndexError("list index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items) if self._own else islice(self._items, self._len)

    __eq__ = _comparison(operator.eq)
    __lt__ = _comparison(operator.lt)
    __le__ = _comparison(operator.le)
    __gt__ = _comparison(operator.gt)
    __ge__ = _comparison(operator.ge)
    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable, as a list

    def __add__(self, other: Iterable[Any]) -> list[Any]:
        if not isinstance(other, (list, ContextMessages)):
            return NotImplemented  # as list + tuple: TypeError
        return [*self, *other]

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        if not isinstance(other, list):
            return NotImplemented
        return [*other, *self]

    def __mul__(self, count: int) -> list[Any]:
        return self._view() * count

    __rmul__ = __mul__

    def copy(self) -> list[Any]:
        """The messages as a new list."""
        return list(self)

    def __reduce__(self) -> Any:
        return (ContextMessages, (list(self),))

    def __repr__(self) -> str:
        return repr(list(self))

    def __setitem__(self, index: Any, value: Any) -> None:
        self._mine()[index] = value

    def __delitem__(self, index: Any) -> None:
        del self._mine()[index]

    def insert(self, index: int, value: Any) -> None:
        self._mine().insert(index, value)

    def append(self, value: Any) -> None:
        self._mine().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        if values is self:
            values = list(self)  # (iterating itself while it grows would never end)
        self._mine().extend(values)

    def __iadd__(self, values: Iterable[Any]) -> ContextMessages:
        self.extend(values)
        return self

    def __imul__(self, count: int) -> ContextMessages:
        mine = self._mine()
        mine[:] = mine * count
        return self

    def pop(self, index: int = -1) -> Any:
        return self._mine().pop(index)

    def clear(self) -> None:
        self._items, self._len, self._own = [], 0, True

    def reverse(self) -> None:
        self._mine().reverse()

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        self._mine().sort(key=key, reverse=reverse)
