"""Reading a session file chunk by chunk gives exactly the lines a whole read and split gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.storage.jsonl_file import LineFile


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    st.integers(min_value=1, max_value=17),
)
def test_chunked_split_equals_a_whole_split(tmp_path_factory, lines, tail, chunk):
    """Any content, any chunk size (lines longer than a chunk included): same lines, same tail."""
    path = tmp_path_factory.mktemp("split") / "s.jsonl"
    data = b"".join(line + b"\n" for line in lines) + tail
    path.write_bytes(data)
    f = LineFile.open(path)
    try:
        got_lines, got_tail, size = f.read_split(0, chunk=chunk)
    finally:
        f.close()
    expected = data.split(b"\n")
    assert (got_lines, got_tail, size) == (expected[:-1], expected[-1], len(data))
