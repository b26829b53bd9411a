"""Session text in a Markdown document, unable to add markup of its own.

A message is Markdown, and its emphasis, lists and code should survive an export; raw HTML must not (a ``<script>``,
or a ``</details>`` that closes the export's own block). Raw HTML always starts with ``<`` followed by a letter, ``/``,
``!`` or ``?``, so each such ``<`` becomes ``&lt;`` and renders as typed. Code shows entities as typed, so code is
handled apart: fenced blocks are written out again at the margin with a fence their text cannot close, and an inline
code span holding such a ``<`` becomes a ``<code>`` element of escaped text. No ``<`` from the session is left raw
wherever a renderer draws a block or span boundary; a misjudged boundary only changes how code looks.

Links stay links only where they lead somewhere plain: a link destination (inline ``[x](dest)`` or a definition
``[x]: dest``) that does not start with ``http:``, ``https:`` or ``mailto:`` (``javascript:``, ``data:``, a relative
path) loses its link syntax, and an image (``![alt](src)``, which a reader would fetch on opening the document) is
written as a link to its source. Both are done with a character reference for the structural ``(``, ``:`` or ``!``,
which CommonMark shows as the character but never reads as structure, whatever backslashes come before it.
"""

from __future__ import annotations

import re
import string
from bisect import bisect_right
from collections.abc import Iterator

_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
_FENCE_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_INFO = re.compile(r"[^\w+#.-]")
# What can start inline markup inside a line (emphasis, code, links, entities, HTML, a heading's closing hashes); an
# underscore inside a word (snake_case) is never emphasis, so it is left as it is.
_MARKUP = re.compile(r"[\\`*\[\]#~&<]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_ENTITIES = {"&": "&amp;", "<": "&lt;"}
# ``](`` or ``]:``, looking ahead at the destination after it (spaces, at most one line break, an optional ``<``):
# only the bracket pair is consumed, so a destination holding another ``](`` is looked at again.
_DESTINATION = re.compile(r"\]([(:])(?=[ \t]*\n?[ \t]*<?([^\s<>]*))")
_SAFE_TARGET = re.compile(r"(?:https?|mailto):", re.IGNORECASE)
_IMAGE = re.compile(r"(?<!\\)((?:\\\\)*)!(?=\[)")  # a ``!`` before ``[`` that no backslash escapes
_CODE_LITERAL = str.maketrans({c: "\\" + c for c in string.punctuation} | {"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape_html(text: str) -> str:
    """``text`` with every ``<`` that could open a tag, comment or autolink, and every ``&`` that would start an
    entity, escaped, and its links and images made inert (see the module documentation); all other Markdown is kept."""
    return inert_links(_TAG_START.sub("&lt;", _ENTITY.sub("&amp;", text)))


def inert_links(text: str) -> str:
    """``text`` (outside code) with images as links and links to anything but http(s) or mailto as plain text."""
    def destination(m: re.Match[str]) -> str:
        if _SAFE_TARGET.match(m.group(2)):
            return m.group()
        return "]&#40;" if m.group(1) == "(" else "]&#58;"

    return _IMAGE.sub(r"\1&#33;", _DESTINATION.sub(destination, text))


def literal(text: str) -> str:
    """``text`` (a name, a title: one line, not at the start of a line) shown exactly as typed."""
    return _MARKUP.sub(lambda m: _ENTITIES.get(m.group(), "\\" + m.group()), text)


def code_span(text: str) -> str:
    """``text`` (one line) as an inline code span that no backtick run in it can close."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest or text.startswith(" ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in ``text``, so no line of it closes the block."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def line_feeds(text: str) -> str:
    """``text`` with CommonMark's other line endings (CR LF, a lone CR) as LF: a fence or tag after a lone CR is at the
    start of a line for a Markdown reader, so it must be for the escaping too."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def message(text: str) -> str:
    """A message's Markdown, safe to put between the export's own blocks (always ends outside any code block)."""
    out: list[str] = []
    prose: list[str] = []
    lines = iter(line_feeds(text).split("\n"))
    for line in lines:
        opened = _FENCE_OPEN.fullmatch(line)
        if opened is None:
            prose.append(line)
            continue
        if opened.group(2)[0] == "`" and "`" in opened.group(3):  # not a fence: a backtick in its info string
            # Escaped, so that writing its code spans as elements (dropping their backticks) cannot make it one.
            prose.append(opened.group(1) + "\\" + line[len(opened.group(1)) :])
            continue
        if prose:
            out.append(_prose("\n".join(prose)))
            prose = []
        out.append(_code_block(lines, len(opened.group(1)), opened.group(2), opened.group(3)))
    if prose:
        out.append(_prose("\n".join(prose)))
    return "\n".join(out)


def _code_block(lines: Iterator[str], indent: int, marker: str, info: str) -> str:
    """A fenced block read up to its closing fence (or the end), written out at the margin with a fence of ours."""
    body: list[str] = []
    for line in lines:
        closing = _FENCE_CLOSE.fullmatch(line)
        if closing is not None and closing.group(1)[0] == marker[0] and len(closing.group(1)) >= len(marker):
            break
        body.append(line[min(indent, len(line) - len(line.lstrip(" "))) :])  # as CommonMark strips the opener's indent
    code = "\n".join(body)
    fence = fence_for(code)
    language = _INFO.sub("", info.strip().split(" ")[0])
    return f"{fence}{language}\n{code}\n{fence}"


def _prose(text: str) -> str:
    """Text outside fenced blocks: escaped paragraph by paragraph (a code span never spans a blank line)."""
    out: list[str] = []
    start = 0
    for gap in _BLANK_LINE.finditer(text):
        out.append(_paragraph(text[start : gap.start()]))
        out.append(gap.group())
        start = gap.end()
    out.append(_paragraph(text[start:]))
    return "".join(out)


def _paragraph(text: str) -> str:
    """One paragraph: code spans found as CommonMark finds them (a backtick run closed by the next run of the same
    length; a backslash before a run outside code makes its first backtick literal), the rest escaped."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    by_size: dict[int, list[int]] = {}  # run indices by length, to find a closer without scanning every run
    for index, (start, end) in enumerate(runs):
        by_size.setdefault(end - start, []).append(index)
    out: list[str] = []
    done = 0  # text before this is written
    i = 0
    while i < len(runs):
        start, end = runs[i]
        escaped = start
        while escaped > done and text[escaped - 1] == "\\":
            escaped -= 1
        start += (start - escaped) % 2
        same = by_size.get(end - start, [])
        later = bisect_right(same, i)
        if start == end or later == len(same):
            i += 1
            continue
        close = same[later]
        out.append(escape_html(text[done:start]))
        inner = text[end : runs[close][0]]
        # A code span shows entities as typed: one that holds markup becomes an element of escaped text instead. So does
        # one over several lines holding a link or image: a line that opens a block (a quote, a list item) would end
        # the paragraph before the span closes, and the renderer would read its links as links.
        unsafe = _TAG_START.search(inner) or ("\n" in inner and inert_links(inner) != inner)
        out.append(f"<code>{_code_text(inner)}</code>" if unsafe else text[start : runs[close][1]])
        done = runs[close][1]
        i = close + 1
    out.append(escape_html(text[done:]))
    return "".join(out)


def _code_text(inner: str) -> str:
    """A code span's text as CommonMark shows it (line breaks as spaces, one space stripped from each side), literal."""
    flat = inner.replace("\n", " ")
    if len(flat) > 2 and flat.startswith(" ") and flat.endswith(" ") and flat.strip(" "):
        flat = flat[1:-1]
    return flat.translate(_CODE_LITERAL)  # markup inside an element is still read: every punctuation mark escaped
