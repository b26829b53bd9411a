"""The words search cuts are the words FTS5 finds: for any text, each of its words (and each word's prefix with ``*``)
finds the entry in the SQLite index, and a word it does not hold does not."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.search.search_index import Change, Filters, SourceState, SqliteSearchIndex
from sessiontree.search.search_text import Row, parse_query, words

texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, other=texts)
def test_every_word_of_a_text_finds_it_in_fts5(text: str, other: str) -> None:
    index = SqliteSearchIndex(":memory:")
    try:
        rows = [Row(2, "e1", None, "user", "", text, "e1"), Row(3, "e2", "e1", "user", "", other, "e2")]
        index.apply([Change("s", SourceState("s").after(rows), rows)])
        for word in set(words(text)) | set(words(other)):
            for query in (word, word[: max(1, len(word) // 2)] + "*"):
                parsed = parse_query(query)
                expected = {e for e, t in (("e1", text), ("e2", other)) if parsed.matches(words(t))}
                assert {h.entry_id for h in index.query(Filters(parsed, 10))} == expected, (query, text, other)
    finally:
        index.close()
