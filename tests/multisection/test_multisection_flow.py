"""Multi-section search, stages 2-5 on real indexed data (no mock of the engine).

The index: the first QASPER validation papers (5 of them, ~280 paragraphs), the demo corpus
(6 papers about long context, reasoning, RAG ...) and three small papers made here whose
paragraphs are too short to quote (quote fallback). Embeddings are cached on disk, so only the
first run pays for the model.
"""

import io
import json
from pathlib import Path

import numpy as np
import pytest

from indexer.embedder import Embedder
from indexer.pipeline import IndexRun
from querybuilder.intent import analyze
from querybuilder.strategies import build_search, make_plan
from scholar_es.engine.rest.console import run_console
from scholar_es.errors import ConfigError, ScholarEsError
from scholar_es.multisection.aggregate import MIN_QUOTE_CHARS
from scholar_es.multisection.decompose import offline_breakdown
from scholar_es.multisection.flow import (
    eval_searcher,
    execute,
    multisection_search,
    prepare,
    render_plan,
    render_result,
    to_search_result,
)
from scholar_es.multisection.merge import merge
from scholar_es.multisection.msearch import SubSearch, run_msearch

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

QASPER_PAPERS = 5
CONTEXT_Q = (
    "How do LLMs handle context length limits when reading long documents or reasoning over many steps?"
)
QASPER_Q = (
    "How is prior knowledge used to regularize text classifiers, and how are semantic roles induced "
    "without supervision?"
)
SHORT_PAPERS = [
    {
        "id": "short-abs",
        "title": "Quantum Widget Calibration",
        "year": 2021,
        "abstract": "We calibrate quantum widgets with a three-stage procedure and report the residual drift.",
        "sections": [
            {"heading": "Results", "paragraphs": ["Quantum widgets.", "Widget calibration.", "See Table 2."]}
        ],
    },
    {
        "id": "short-first",
        "title": "Calibrating Quantum Widgets Again",
        "year": 2022,
        "sections": [
            {"heading": "Introduction", "paragraphs": ["Quantum widgets.", "Calibration: widgets."]},
            {
                "heading": "Method",
                "paragraphs": [
                    "Widgets drift, so the calibration is repeated hourly.",
                    "Widget calibration.",
                ],
            },
        ],
    },
    {
        "id": "short-none",
        "title": "Widget Calibration Notes",
        "year": 2020,
        "sections": [{"heading": "Notes", "paragraphs": ["Quantum widgets.", "Widget calibration."]}],
    },
]


class CountingClient:
    """The engine's client, with its msearch and search calls counted (everything runs for real)."""

    def __init__(self, es):
        self._es = es
        self.msearch_calls: list[dict] = []
        self.search_calls: list[dict] = []

    def msearch(self, **kw):
        self.msearch_calls.append(kw)
        return self._es.msearch(**kw)

    def search(self, **kw):
        self.search_calls.append(kw)
        return self._es.search(**kw)

    def __getattr__(self, name):
        return getattr(self._es, name)


@pytest.fixture(scope="session")
def embedder():
    return Embedder()


@pytest.fixture(scope="session")
def ms_engine(tmp_path_factory, shared_data, embedder):
    """An embedded engine holding QASPER papers, the demo corpus and the short-quote papers."""
    from scholar_es.engine.rest.transport import embedded_client

    src = shared_data / "qasper" / "papers_validation.jsonl"
    if not src.is_file():
        pytest.skip(f"{src} not found")
    root = tmp_path_factory.mktemp("multisection")
    with src.open(encoding="utf-8") as f:
        lines = [line for _, line in zip(range(QASPER_PAPERS + 1), f, strict=False)]
    # the second validation paper is four times longer than the others: leave it out to keep embedding cheap
    (root / "qasper.jsonl").write_text("".join(lines[:1] + lines[2:]), encoding="utf-8")
    (root / "short.jsonl").write_text("".join(json.dumps(p) + "\n" for p in SHORT_PAPERS), encoding="utf-8")
    es = embedded_client(root / "engine")
    for path, fmt in (
        (root / "qasper.jsonl", "qasper"),
        (REPO / "scripts" / "demo_papers.jsonl", "jsonl"),
        (root / "short.jsonl", "jsonl"),
    ):
        summary = IndexRun(es, embedder).run([path], fmt)
        assert summary.rejected == 0, summary.errors
    yield es
    es.close()


@pytest.fixture(scope="session")
def total_chunks(ms_engine):
    return ms_engine.count(index="chunks")["count"]


def hybrid_ranking(es, question, embedder, n):
    """The original question's hybrid query over the whole index, every chunk scored (no cap)."""
    plan = make_plan(question, strategy="hybrid", size=n).with_changes(collapse=False, cap=0)
    vector = embedder.encode([plan.question])[0]
    hits = es.search(index="chunks", body=build_search(plan, vector).to_dict())["hits"]["hits"]
    return [(h["_id"], h["_score"]) for h in hits]


# --- stage 2: one _msearch carrying 1 + N searches ---------------------------------------------------
def test_one_msearch_carries_keyword_and_every_section(ms_engine, embedder):
    es = CountingClient(ms_engine)
    result = multisection_search(es, CONTEXT_Q, embedder=embedder)
    sections = offline_breakdown(CONTEXT_Q).sections
    assert len(es.msearch_calls) == 1
    lines = es.msearch_calls[0]["searches"]
    assert len(lines) == 2 * (1 + len(sections))
    assert result.plan.msearch_calls == 1
    reports = result.plan.sections
    assert [r.name for r in reports] == ["keyword"] + [f"section {i}" for i in range(1, len(sections) + 1)]
    assert [r.title for r in reports[1:]] == [s.title for s in sections]
    # keyword: bm25, keyword boosts, paper level (collapse on paper_id, one hit per paper)
    kw_body = lines[1]
    assert reports[0].strategy == "bm25" and reports[0].search_type == "keyword"
    assert kw_body["collapse"] == {"field": "paper_id"} and kw_body["size"] == 50
    assert kw_body["query"]["multi_match"]["fields"] == ["title^3", "abstract^2", "chunk_text"]
    # sections: section boosts, the multipliers of each title's OWN intent rule, 50 passages
    for report, body, section in zip(reports[1:], lines[3::2], sections, strict=True):
        fs = body["query"]["function_score"]
        assert report.search_type == "section" and body["size"] == 50 and "collapse" not in body
        assert report.intent_rule == analyze(section.title).rule
        mm = fs["query"]["bool"]["should"][0]["script_score"]["query"]["multi_match"]
        assert mm["query"] == section.title and mm["fields"] == ["chunk_text^2", "abstract^1.5", "title"]
    # besides the _msearch: the re-scoring, and one search for the missing quotes if any
    assert len(es.search_calls) == 1 + bool(result.plan.quote_fallback)
    assert result.papers[0].paper_id in ("demo-001", "demo-005")
    assert {"demo-001", "demo-005"} <= {p.paper_id for p in result.papers[:3]}


def test_keyword_search_is_paper_level(ms_engine, embedder):
    prepared = prepare(ms_engine, QASPER_Q, embedder=embedder)
    results, _ = run_msearch(ms_engine, prepared.searches[:1])
    papers = [h["_source"]["paper_id"] for h in results[0].hits]
    assert papers and len(papers) == len(set(papers))


# --- stage 3: de-duplication by chunk ---------------------------------------------------------------
def test_candidates_deduplicated_by_chunk(ms_engine, embedder):
    prepared = prepare(ms_engine, QASPER_Q, embedder=embedder)
    results, _ = run_msearch(ms_engine, prepared.searches)
    all_ids = [h["_source"]["chunk_id"] for r in results for h in r.hits]
    candidates, contrib = merge(results)
    assert len(all_ids) > len(set(all_ids))  # the searches overlap: there is something to de-duplicate
    assert [c.chunk_id for c in candidates] == list(dict.fromkeys(all_ids))
    assert sum(c.new for c in contrib.values()) == len(candidates)
    for r in results:
        assert contrib[r.search.name].hits == len(r.hits)
    shared = [c for c in candidates if len(c.found_by) > 1]
    assert shared and all(set(c.found_by) <= {s.name for s in prepared.searches} for c in shared)
    result = execute(ms_engine, prepared)
    assert result.plan.candidates == len(candidates) == len(result.hits)
    assert len({h.chunk_id for h in result.hits}) == len(result.hits)
    assert [(s.hits, s.new, s.unique) for s in result.plan.sections] == [
        (contrib[s.name].hits, contrib[s.name].new, contrib[s.name].unique) for s in result.plan.sections
    ]


# --- stage 4: re-scoring inside the engine ----------------------------------------------------------
@pytest.mark.parametrize("question", [CONTEXT_Q, QASPER_Q])
def test_rescoring_is_the_original_questions_hybrid_order(ms_engine, embedder, total_chunks, question):
    es = CountingClient(ms_engine)
    result = multisection_search(es, question, embedder=embedder)
    rescore_body = es.search_calls[0]["body"]
    ids = {h.chunk_id for h in result.hits}
    assert sorted(rescore_body["query"]["bool"]["filter"][-1]["terms"]["chunk_id"]) == sorted(ids)
    knn = rescore_body["query"]["bool"]["should"][-1]["knn"]  # the ids are the kNN pre-filter too
    assert (
        knn["filter"][-1]["terms"]["chunk_id"]
        == rescore_body["query"]["bool"]["filter"][-1]["terms"]["chunk_id"]
    )
    assert knn["k"] >= len(ids)
    full = hybrid_ranking(ms_engine, question, embedder, total_chunks)
    expected = [(doc, score) for doc, score in full if doc in ids]
    assert [h.chunk_id for h in result.hits] == [doc for doc, _ in expected]
    np.testing.assert_allclose([h.score for h in result.hits], [s for _, s in expected], rtol=1e-6)
    assert result.plan.rescore.scored == result.plan.candidates == len(result.hits)


# --- stage 5: aggregation to papers -----------------------------------------------------------------
def test_aggregation_to_papers(ms_engine, embedder):
    result = multisection_search(ms_engine, QASPER_Q, embedder=embedder, papers=4)
    assert len(result.papers) == 4
    scores = [p.score for p in result.papers]
    assert scores == sorted(scores, reverse=True)
    for paper in result.papers:
        own = [h for h in result.hits if h.paper_id == paper.paper_id]
        assert 1 <= len(paper.chunks) <= 3
        assert [c.chunk_id for c in paper.chunks] == [h.chunk_id for h in own[:3]]
        assert paper.score == paper.chunks[0].score == own[0].score
        for c in paper.chunks:
            assert c.section_type and c.found_by and len(c.text) >= MIN_QUOTE_CHARS
            assert c.quote_source == "chunk" and c.quote
    # papers are the distinct papers of the chunk ranking, in order of first appearance
    assert [p.paper_id for p in result.papers] == list(dict.fromkeys(h.paper_id for h in result.hits))[:4]
    assert {"1503.00841", "1603.01514"} <= {p.paper_id for p in result.papers}
    everything = multisection_search(ms_engine, QASPER_Q, embedder=embedder)
    assert len(everything.papers) <= 20


def test_quote_fallback_to_abstract_then_first_paragraph(ms_engine, embedder):
    es = CountingClient(ms_engine)
    result = multisection_search(es, "quantum widget calibration", embedder=embedder, papers=20)
    papers = {p.paper_id: p for p in result.papers}
    assert {"short-abs", "short-first", "short-none"} <= set(papers)
    assert {"short-abs", "short-first", "short-none"} <= set(result.plan.quote_fallback)
    assert len(es.search_calls) == 2  # re-scoring + ONE search for every missing quote
    abs_paper = papers["short-abs"]
    assert any(len(c.text) < MIN_QUOTE_CHARS for c in abs_paper.chunks)
    for c in abs_paper.chunks:
        if len(c.text) < MIN_QUOTE_CHARS:
            assert c.quote_source == "abstract" and c.quote.startswith("We calibrate quantum widgets")
        else:
            assert c.quote_source == "chunk"
    first = papers["short-first"]
    for c in first.chunks:
        if len(c.text) < MIN_QUOTE_CHARS:
            assert c.quote_source == "first_paragraph"
            assert c.quote == "Calibration: widgets."  # the first paragraph with 20+ characters
        else:
            assert c.quote_source == "chunk" and c.quote == c.text
    assert papers["short-none"].quote_source == "none" and papers["short-none"].quote == ""
    text = render_result(result)
    assert "[quote from abstract]" in text and "[quote from first paragraph]" in text


# --- faults -----------------------------------------------------------------------------------------
def test_failed_sub_searches_are_reported_and_the_others_count(ms_engine, embedder):
    prepared = prepare(ms_engine, CONTEXT_Q, embedder=embedder)
    good = execute(ms_engine, prepared)
    missing = prepared.searches[2].with_index("no-such-index")
    bad = prepared.searches[3]
    broken = SubSearch(
        bad.name,
        bad.kind,
        bad.title,
        bad.plan,
        bad.search.update_from_dict(
            {"query": {"knn": {"field": "vector", "query_vector": [1.0, 2.0], "k": 5, "num_candidates": 10}}}
        ),
    )
    prepared.searches[2:4] = [missing, broken]
    result = execute(ms_engine, prepared)
    reports = {r.name: r for r in result.plan.sections}
    assert len(result.plan.errors) == 2
    assert "index_not_found_exception" in reports["section 2"].error and reports["section 2"].status == 404
    assert reports["section 3"].error and reports["section 3"].status == 400
    assert reports["section 2"].hits == reports["section 3"].hits == 0
    assert reports["keyword"].error is None and reports["section 1"].hits == 50
    # the candidates are exactly those of the searches that worked
    ok = {h.chunk_id for h in result.hits}
    assert len(ok) == reports["keyword"].new + reports["section 1"].new
    assert result.papers and len(ok) < good.plan.candidates
    assert "FAILED (status 404)" in render_plan(result.plan)


def test_every_sub_search_failing_raises(ms_engine, embedder):
    prepared = prepare(ms_engine, CONTEXT_Q, embedder=embedder)
    prepared.searches = [s.with_index("gone") for s in prepared.searches]
    with pytest.raises(ScholarEsError, match="every search of the _msearch failed"):
        execute(ms_engine, prepared)


@pytest.mark.parametrize("question", ["and or, and?", "???"])
def test_question_that_decomposes_into_nothing_still_returns_results(ms_engine, embedder, question):
    result = multisection_search(ms_engine, question, embedder=embedder)
    assert [s.kind for s in result.plan.sections] == ["keyword", "question"]
    assert result.papers and result.hits  # the kNN part of the question's section and re-scoring


def test_llm_breakdown_and_llm_failure(ms_engine, embedder):
    def llm(prompt):
        assert CONTEXT_Q in prompt
        return json.dumps(
            {
                "keywords": "context length long documents reasoning",
                "sections": ["Long-document memory", "Compressing reasoning traces"],
            }
        )

    es = CountingClient(ms_engine)
    result = multisection_search(es, CONTEXT_Q, llm=llm, embedder=embedder)
    assert result.plan.decomposer == "llm"
    assert [s.title for s in result.plan.sections] == [
        "context length long documents reasoning",
        "Long-document memory",
        "Compressing reasoning traces",
    ]
    assert len(es.msearch_calls) == 1 and len(es.msearch_calls[0]["searches"]) == 6

    def broken(prompt):
        raise ConnectionError("no route to the model")

    result = multisection_search(ms_engine, CONTEXT_Q, llm=broken, embedder=embedder)
    assert result.plan.decomposer == "fallback" and "ConnectionError" in result.plan.note
    assert [s.title for s in result.plan.sections[1:]] == [
        s.title for s in offline_breakdown(CONTEXT_Q).sections
    ]
    assert result.papers


def test_survey_question_adds_a_survey_section(ms_engine, embedder):
    q = "Give me a survey of retrieval-augmented generation for scientific question answering"
    result = multisection_search(ms_engine, q, embedder=embedder)
    survey = [s for s in result.plan.sections if s.kind == "survey"]
    assert len(survey) == 1 and survey[0].search_type == "survey" and survey[0].hits > 0
    assert result.plan.survey and result.papers[0].paper_id == "demo-002"
    # an LLM breakdown without a survey section gets one added, searched with the survey boosts
    result = multisection_search(
        ms_engine, q, embedder=embedder, llm=lambda p: '["RAG for science"]', show_plan=True
    )
    assert [s.kind for s in result.plan.sections] == ["keyword", "survey", "facet"]
    assert '"title^4", "abstract^2.5", "chunk_text"' in result.plan.sections[1].console


def test_show_plan_consoles_run_as_is(ms_engine, embedder):
    plain = multisection_search(ms_engine, CONTEXT_Q, embedder=embedder)
    assert all(s.console == "" for s in plain.plan.sections) and plain.plan.msearch_console == ""
    result = multisection_search(ms_engine, CONTEXT_Q, embedder=embedder, show_plan=True)
    section = result.plan.sections[1]
    assert section.console.startswith("GET chunks/_search\n")
    out = io.StringIO()
    assert not run_console(ms_engine, io.StringIO(section.console + "\n" + result.plan.rescore.console), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(answers[0]["hits"]["hits"]) == section.hits
    assert [h["_id"] for h in answers[1]["hits"]["hits"]] == [h.chunk_id for h in result.hits]
    out = io.StringIO()
    assert not run_console(ms_engine, io.StringIO(result.plan.msearch_console), out)
    assert len(json.loads(out.getvalue())["responses"]) == len(result.plan.sections)
    text = render_result(result, show_plan=True)
    assert "4 in 1 _msearch" in text and "[rescore]" in text and "GET _msearch" not in text


def test_filters_apply_to_every_search(ms_engine, embedder):
    result = multisection_search(ms_engine, CONTEXT_Q, embedder=embedder, filters={"year_from": 2024})
    assert result.hits and {h.year for h in result.hits} == {2024}


def test_search_result_view_and_options(ms_engine, embedder):
    result = multisection_search(
        ms_engine, QASPER_Q, embedder=embedder, papers=3, per_section=10, keyword_size=5
    )
    assert result.plan.sections[0].hits <= 5 and all(s.hits <= 10 for s in result.plan.sections[1:])
    view = to_search_result(result, size=7)
    assert view.strategy == "multisection" and len(view.hits) == 7 and len(view.papers) == 3
    assert [h.chunk_id for h in view.hits] == [h.chunk_id for h in result.hits[:7]]
    with pytest.raises(ConfigError, match="papers"):
        multisection_search(ms_engine, QASPER_Q, embedder=embedder, papers=0)
    with pytest.raises(ConfigError, match="per_section"):
        multisection_search(ms_engine, QASPER_Q, embedder=embedder, per_section=20_000)
    with pytest.raises(ConfigError, match="not found"):
        multisection_search(ms_engine, QASPER_Q, embedder=embedder, prefix="nope-")
    json.loads(result.model_dump_json())  # a backend can send it as is


def test_eval_searcher_for_the_harness(ms_engine, embedder):
    wall, plans = [], []
    search = eval_searcher(ms_engine, embedder=embedder, size=5, wall_times_ms=wall, plans=plans)
    hits, seconds = search(QASPER_Q, {"paper_ids": ["1503.00841"]})
    assert len(hits) == 5 and {h["paper_id"] for h in hits} == {"1503.00841"}
    assert set(hits[0]) == {"chunk_id", "paper_id"}
    assert 0 < seconds * 1000 <= wall[0] and len(plans) == 1


# --- optional cross-encoder -------------------------------------------------------------------------
class LengthScorer:
    """A stand-in cross-encoder (the pluggable ``predict(pairs)`` interface): longer texts first."""

    def predict(self, pairs):
        return [float(len(text)) for _, text in pairs]


def test_crossencoder_object_reorders(ms_engine, embedder):
    result = multisection_search(ms_engine, QASPER_Q, embedder=embedder, crossencoder=LengthScorer())
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert result.plan.rescore.crossencoder == "LengthScorer"
    top = result.papers[0].chunks[0]
    assert top.crossencoder_score == top.score and top.hybrid_score is not None


def test_crossencoder_by_name(ms_engine, embedder, tmp_path):
    """A real sentence-transformers CrossEncoder from a local directory (a tiny random BERT with the
    shipped model's tokenizer: no download)."""
    transformers = pytest.importorskip("transformers")
    from indexer.embedder import resolve_model

    tok = transformers.AutoTokenizer.from_pretrained(resolve_model("all-MiniLM-L6-v2"))
    transformers.set_seed(0)
    config = transformers.BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    transformers.BertForSequenceClassification(config).save_pretrained(tmp_path / "ce")
    tok.save_pretrained(tmp_path / "ce")
    result = multisection_search(
        ms_engine,
        QASPER_Q,
        embedder=embedder,
        crossencoder=str(tmp_path / "ce"),
        per_section=10,
        keyword_size=10,
    )
    assert result.plan.rescore.crossencoder == str(tmp_path / "ce")
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) > 1
    with pytest.raises(ConfigError, match="cannot load cross-encoder"):
        multisection_search(ms_engine, QASPER_Q, embedder=embedder, crossencoder=str(tmp_path / "missing"))
