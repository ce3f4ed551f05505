"""The term -> docs postings view is saved with the segment (issue 16): a cold start reads it,
checksummed like every other array, instead of rebuilding it; segments saved before it was stored
still open (the view is then built on the first search)."""

from __future__ import annotations

import numpy as np
import pytest

from scholar_es.engine.index.commit import read_commit
from scholar_es.engine.index.indices import Engine
from scholar_es.engine.index.segment import Segment
from scholar_es.engine.index.segment.postings import Postings
from scholar_es.engine.rest.transport import embedded_client

QUERIES = [
    {"match": {"title": "graph neural"}},
    {"term": {"tag": "t2"}},
    {"bool": {"must": {"match": {"title": "model"}}, "filter": {"term": {"tag": "t1"}}}},
]


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(
        index="p", mappings={"properties": {"title": {"type": "text"}, "tag": {"type": "keyword"}}}
    )
    words = ["graph", "neural", "model", "data", "cell", "gene"]
    for i in range(60):
        title = " ".join(words[(i * j + j) % len(words)] for j in range(1 + i % 7))
        es.index(index="p", id=str(i), document={"title": title, "tag": f"t{i % 4}"})
    es.indices.refresh(index="p")
    answers = [es.search(index="p", query=q, size=100)["hits"] for q in QUERIES]
    es.close()
    return path, answers


def _fresh_csc(p: Postings) -> tuple[np.ndarray, ...]:
    rebuilt = Postings()
    rebuilt.vocab, rebuilt.indptr, rebuilt.indices, rebuilt.data = p.vocab, p.indptr, p.indices, p.data
    return rebuilt.csc()


def test_a_cold_start_reads_the_saved_view_and_answers_the_same(saved):
    path, answers = saved
    engine = Engine(path)
    try:
        seg = engine.handle("p").segment()
        for col in (seg.text["title"], seg.keyword["tag"]):
            saved_view = col.postings.base_view  # loaded with the segment, before any search
            assert saved_view is not None
            assert not any(a.flags.writeable for a in saved_view)  # views of the file read, not rebuilt
            for got, want in zip(saved_view, _fresh_csc(col.postings), strict=True):
                assert got.dtype == want.dtype and np.array_equal(got, want)
    finally:
        engine.store.close()
    es = embedded_client(path)
    assert [es.search(index="p", query=q, size=100)["hits"] for q in QUERIES] == answers
    es.close()


def _layout(path):
    (folder,) = (path / "segments").iterdir()
    _, arrays, meta = read_commit(folder)
    return arrays, meta["segment"]


def test_a_segment_saved_without_the_view_still_opens_and_builds_it(saved):
    path, _ = saved
    arrays, desc = _layout(path)
    old = dict(desc)
    old["text"] = [[name, vocab, refs[:5]] for name, vocab, refs in desc["text"]]
    old["keyword"] = [[name, vocab, refs[:4]] for name, vocab, refs in desc["keyword"]]
    engine = Engine(path)
    try:
        mapping = engine.handle("p").mapping
    finally:
        engine.store.close()
    seg = Segment.from_arrays(arrays, old, mapping)
    p = seg.text["title"].postings
    assert p.base_view is None
    docs, freqs = p.postings("graph")
    assert len(docs) and np.all(np.diff(docs) > 0) and np.all(freqs >= 1)


@pytest.mark.parametrize("which", ["offsets", "positions", "freqs"])
def test_an_inconsistent_saved_view_is_refused(saved, which):
    path, _ = saved
    arrays, desc = _layout(path)
    arrays = [np.array(a) for a in arrays]  # writable copies
    name, vocab, refs = desc["text"][0]
    col_ptr, docs, freqs = (arrays[i] for i in refs[5:8])
    if which == "offsets":
        col_ptr[-1] += 1
    elif which == "positions":
        docs[0] = desc["n"]  # one past the last document
    else:
        freqs[0] += 1
    engine = Engine(path)
    try:
        mapping = engine.handle("p").mapping
    finally:
        engine.store.close()
    with pytest.raises(ValueError):
        Segment.from_arrays(arrays, desc, mapping)


def test_saved_arrays_are_read_back_aligned(tmp_path):
    # commit.ALIGN: float32 kernels on an 8-byte aligned view of the vectors ran ~1.6x slower
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(
        index="v", mappings={"properties": {"v": {"type": "dense_vector", "dims": 5}, "t": {"type": "text"}}}
    )
    for i in range(7):
        es.index(index="v", id=str(i), document={"v": [i, 1, 2, 3, 4], "t": "x " * i})
    es.indices.refresh(index="v")
    es.close()
    (folder,) = (path / "segments").iterdir()
    _, arrays, _ = read_commit(folder)
    assert all(a.ctypes.data % 16 == 0 for a in arrays if a.nbytes)
