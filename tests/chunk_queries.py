"""Hypothesis strategies for text queries over chunks (``body``, ``abstract``, ``title``), shared by
the engine's property tests of the runs path and of pruned top hits."""

from __future__ import annotations

from hypothesis import strategies as st


def text_strategies(vocabulary: list[str], max_words: int):
    """(words, fields, multi_match): a query text of 1..``max_words`` words of ``vocabulary`` or
    one absent from it; 1-3 of the chunk fields with boosts, in any order; a best_fields
    multi_match of those with a tie_breaker and a boost."""
    words = st.lists(st.sampled_from([*vocabulary, "absent"]), min_size=1, max_size=max_words).map(" ".join)
    fields = st.permutations(["body^2", "abstract^1.5", "title"]).flatmap(
        lambda fs: st.integers(1, 3).map(lambda k: fs[:k])
    )
    multi_match = st.builds(
        lambda w, fs, t, b: {
            "multi_match": {"query": w, "fields": fs, "tie_breaker": t, "type": "best_fields", "boost": b}
        },
        words,
        fields,
        st.sampled_from([0.0, 0.3, 1.0]),
        st.sampled_from([1.0, 2.0, 0.5]),
    )
    return words, fields, multi_match
