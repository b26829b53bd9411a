"""Bounding session text before a human view shows it.

Session content can be huge (a 50 MB tool output, a 5 MB working directory) and rich lays text out in time that
grows faster than its size, so every view clips what it shows first: a block to a number of lines and characters,
a one-line field to a number of characters, each with a marker saying how much was left out. Every function here
reads only the part it keeps plus one linear count of the rest, so a 40 MB line costs a scan, not a layout.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import attrs

BLOCK_LINES = 12
BLOCK_CHARS = 4_000  # about 50 rows on an 80-column terminal
FIELD_CHARS = 200
PIECE_CHARS = 8_000
FULL_HINT = "--full shows all"

_NON_SPACE = re.compile(r"\S")
# Control characters a session may hold (an ESC starts a terminal command: clear the screen, set the title, write the
# clipboard) are shown as escapes, never sent to the terminal. Tab and newline are layout; rich drops CR itself.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\t\n\r"}


def visible(text: str) -> str:
    """``text`` with its control characters written as ``\\xNN`` escapes (linear, in C)."""
    return text.translate(_CONTROLS)


@attrs.frozen
class Clipped:
    """The part of a text that is shown, and how much of the rest was left out."""

    text: str
    more_chars: int = 0  # characters left out (newlines included)
    more_lines: int = 0  # lines left out entirely

    def marker(self, hint: str = FULL_HINT) -> str:
        """``… 49,987,311 more characters, 812 more lines (--full shows all)``, or "" when nothing was cut."""
        if not self.more_chars:
            return ""
        what = [f"{self.more_chars:,} more character" + ("s" if self.more_chars != 1 else "")]
        if self.more_lines:
            what.append(f"{self.more_lines:,} more line" + ("s" if self.more_lines != 1 else ""))
        return f"… {', '.join(what)}" + (f" ({hint})" if hint else "")


def clip_block(text: str, lines: int = BLOCK_LINES, chars: int = BLOCK_CHARS) -> Clipped:
    """The first ``lines`` lines of ``text``, at most ``chars`` characters in all (a long line is cut)."""
    limit = min(len(text), chars)
    if limit == len(text) and text.count("\n", 0, limit) < lines:
        return Clipped(visible(text))
    end = 0
    for _ in range(lines):
        newline = text.find("\n", end, limit)
        if newline < 0:
            end = limit
            break
        end = newline + 1
    if end == len(text):
        return Clipped(visible(text))
    shown = text[:end]
    partial = not shown.endswith("\n")  # the last shown line goes on past the cut
    rest_lines = text.count("\n", end) + (0 if text.endswith("\n") else 1)
    return Clipped(visible(shown.removesuffix("\n")), len(text) - end, rest_lines - (1 if partial else 0))


def _head(text: str, chars: int) -> tuple[str, bool]:
    """The text from its first non-space character, long enough to give ``chars`` characters once whitespace runs are
    collapsed (unless whitespace runs are huge), and whether it reaches the text's last non-space character."""
    first = _NON_SPACE.search(text)
    if first is None:
        return "", True
    end = first.start() + chars * 4
    return text[first.start() : end], end >= len(text) or _NON_SPACE.search(text, end) is None


def clip_field(text: str, chars: int = FIELD_CHARS) -> str:
    """A one-line field (a name, a path, a label): as it is when short and on one line, else with whitespace runs shown
    as one space, cut at ``chars`` with a count of what was left out."""
    if len(text) <= chars and text.isprintable():
        return text
    head, whole = _head(text, chars)
    flat = visible(" ".join(head.split()))
    if whole and len(flat) <= chars:
        return flat
    shown = flat[:chars]
    return f"{shown}… ({len(text) - len(shown):,} more characters)"


def clip_repr(text: str, chars: int = FIELD_CHARS) -> str:
    """``repr(text)`` (a name, quoted), of its first ``chars`` characters only when it is longer."""
    if len(text) <= chars:
        return repr(text)
    return f"{text[:chars]!r}… ({len(text) - chars:,} more characters)"


def one_line(text: str, limit: int) -> str:
    """Whitespace collapsed to single spaces, cut at ``limit`` characters with an ellipsis (a gist: no count)."""
    head, whole = _head(text, limit)
    flat = visible(" ".join(head.split()))
    if whole and len(flat) <= limit:
        return flat
    return flat[: limit - 1] + "…" if len(flat) >= limit else flat + "…"


def pieces(text: str, size: int = PIECE_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of at most ``size`` characters, each cut at its last newline (dropped: the
    pieces are shown as lines), or, in a line longer than ``size``, at ``size``.

    rich splits a laid-out block into lines by repeated partition, which is quadratic in the block's size; shown as
    separate pieces, a whole text (``--full``) costs linear time.
    """
    start = 0
    while len(text) - start > size:
        cut = text.rfind("\n", start, start + size)
        if cut < 0:
            yield visible(text[start : start + size])
            start += size
        else:
            yield visible(text[start:cut])
            start = cut + 1
    yield visible(text[start:])
