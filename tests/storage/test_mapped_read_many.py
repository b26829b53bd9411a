"""A pass reads neighbouring lines of a file together (``MappedLines.read_many``): the same bytes as one line at a
time, for any lines asked, in any order, repeated or out of range."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.storage import mapped
from sessiontree.storage.mapped import MappedLines, map_file

lines_st = st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"x")), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(lines=lines_st, asked=st.lists(st.integers(min_value=-3, max_value=70), max_size=80), window=st.sampled_from([64, 1 << 20]))
def test_read_many_gives_each_line_as_reading_it_alone_does(tmp_path_factory, lines, asked, window):
    path = tmp_path_factory.mktemp("m") / "f.jsonl"
    data = b"".join(line + b"\n" for line in lines)
    path.write_bytes(data)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    fd = os.open(path, os.O_RDONLY)
    try:
        view = map_file(fd, path, len(data))
        assert view is not None
        held = MappedLines(view, offsets, [b"appended"])
        old, mapped.WINDOW = mapped.WINDOW, window  # small windows: many runs, each a read of its own
        try:
            got = held.read_many(asked)
        finally:
            mapped.WINDOW = old
        assert got == {n: held[n] for n in set(asked) if 0 <= n < len(lines)}
        view.close()
    finally:
        os.close(fd)
