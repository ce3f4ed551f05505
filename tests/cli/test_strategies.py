"""Every strategy of the registry through every door: ``scholar-es search``, ``scholar-es query
--format json|console``, ``scholar-es eval`` and the Python API, on the embedded engine with the
real bundled model (all-MiniLM-L6-v2; the embedding cache makes reruns cheap).

The data (tests/toyworld.py): a tiny judged BEIR set (6 abstracts on distinct topics, 4
questions each citing one), indexed once under ``toy-`` (the prefix ``eval`` uses for it), with
heads trained on its questions for the multi-head strategies. The test is parametrized over ``names()``, so a
strategy added to the registry is covered without touching this file.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from toyworld import DOCS, EXPECTED, HEADS, PREFIX, QUESTION, build_world

from querybuilder import registry, strategies
from querybuilder.strategies import search
from scholar_es.cli import main
from scholar_es.engine.rest.console import run_console
from scholar_es.engine.rest.transport import embedded_client


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(dataset dir, engine dir, embedder): the corpus indexed under toy-, heads ``toy`` trained."""
    return build_world(tmp_path_factory.mktemp("strategies"))


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def options(name: str, engine: Path) -> list[str]:
    heads = ["--heads", HEADS] if "heads" in registry.get(name).takes else []
    return ["--strategy", name, "--prefix", PREFIX, "--es", str(engine), *heads]


@pytest.mark.slow
@pytest.mark.parametrize("name", registry.names())
def test_every_strategy_runs_through_search_query_eval_and_python(world, name, tmp_path):
    data, engine, embedder = world
    strategy = registry.get(name)
    heads = HEADS if "heads" in strategy.takes else None

    # Python API: one SearchResult shape for every strategy
    es = embedded_client(engine)
    try:
        result = search(es, QUESTION, strategy=name, embedder=embedder, prefix=PREFIX, size=3, heads=heads)
    finally:
        es.close()
    assert result.strategy == name
    assert result.hits and result.hits[0].paper_id == EXPECTED, [h.paper_id for h in result.hits]
    assert all(h.chunk_text and h.paragraph_ids for h in result.hits)

    # scholar-es search, text and --json
    text = cli("search", QUESTION, *options(name, engine), "--size", "3")
    assert text.exit_code == 0, text.output
    assert EXPECTED in text.output
    out = cli("search", QUESTION, *options(name, engine), "--size", "3", "--json")
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    assert answer["hits"][0]["paper_id"] == EXPECTED
    hit = answer["hits"][0]
    if strategy.needs.heads:  # how the vector was routed comes with the hits
        assert answer["routing"]["heads"] == HEADS and f"# heads {HEADS}: " in text.output
    assert hit["chunk_text"] == DOCS[EXPECTED][1] and hit["paragraph_ids"] == [f"{EXPECTED}#abs"]
    lines = out.output.splitlines()
    assert not any(line.strip().rstrip(",").lstrip("-").replace(".", "").isdigit() for line in lines), (
        "a number on a line of its own: vectors must stay on one line"
    )

    # scholar-es query: json is exactly what search sent; console runs as is in the engine
    query = cli("query", QUESTION, *options(name, engine), "--size", "3")
    assert query.exit_code == 0, query.output
    bodies = json.loads(query.output)
    if name != "multisection":  # its re-scoring search depends on what the _msearch returns
        assert bodies == answer["request"]
    else:
        assert isinstance(bodies, list) and len(bodies) >= 2  # the keyword search and the sections
    console = cli("query", QUESTION, *options(name, engine), "--size", "3", "--format", "console")
    assert console.exit_code == 0, console.output
    es = embedded_client(engine)
    try:
        responses = io.StringIO()
        assert run_console(es, io.StringIO(console.output), responses) == 0  # no request failed
    finally:
        es.close()
    replies = [json.loads(line) for line in responses.getvalue().splitlines()]
    answered = replies[0].get("responses", replies)  # one _msearch, or one _search
    assert answered and all(r["hits"]["hits"] for r in answered)

    # scholar-es eval on the judged set (its own questions: heads would be memorizing, which is
    # fine here -- the point is that the strategy runs)
    metrics_file = tmp_path / "metrics.json"
    ev = cli(
        "eval",
        str(data),
        "--format",
        "beir",
        "--json",
        str(metrics_file),
        *options(name, engine)[:2],
        "--es",
        str(engine),
        *(["--heads", HEADS] if heads else []),
    )
    assert ev.exit_code == 0, ev.output
    metrics = json.loads(metrics_file.read_text())[name]
    assert metrics["ndcg@10"] >= 0.75, metrics


# --- the registry itself ---------------------------------------------------------------------------
def test_registry_lists_every_strategy_once_with_its_needs():
    names = registry.names()
    assert names[: len(strategies.BUILDER_STRATEGIES)] == list(strategies.BUILDER_STRATEGIES)
    assert {"direct", "multihead", "multihead-hybrid", "multisection"} <= set(names)
    assert len(names) == len(set(names))
    for name in names:
        s = registry.get(name)
        assert s.name == name and s.description
        assert s.needs.heads == ("heads" in s.takes), name
        assert s.needs.license in ("basic", "enterprise")
    assert [n for n in names if registry.get(n).needs.license == "enterprise"] == ["rrf", "linear"]
    assert [n for n in names if not registry.get(n).needs.vector] == ["bm25"]


def test_register_refuses_a_builder_name_and_make_plan_refuses_other_strategies():
    from querybuilder.strategies import make_plan
    from scholar_es.errors import ConfigError

    with pytest.raises(ConfigError, match="one of the query builder's own"):
        registry.register(
            registry.get("multisection").__class__(
                name="hybrid", description="x", needs=registry.Needs(vector=True)
            )
        )
    with pytest.raises(ConfigError, match="'multihead' is not one query-builder plan"):
        make_plan("aspirin", strategy="multihead")
    with pytest.raises(ConfigError, match="unknown strategy 'nope'; valid strategies: .*'multisection'"):
        make_plan("aspirin", strategy="nope")


# --- what is refused, and how -------------------------------------------------------------------
def refused(*args: str) -> str:
    result = cli(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("command", ["search", "query"])
def test_unknown_strategy_lists_the_registry(command, tmp_path):
    out = refused(command, "aspirin", "--strategy", "nope", "--es", str(tmp_path / "e"))
    assert "unknown strategy 'nope'" in out
    for name in registry.names():
        assert f"'{name}'" in out, name


def test_eval_unknown_strategy_lists_the_registry(tmp_path):
    data = tmp_path / "toy"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text(json.dumps({"_id": "d", "title": "t", "text": "x"}) + "\n")
    (data / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "x"}) + "\n")
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\td\t1\n")
    out = refused("eval", str(data), "--strategy", "dense,nope", "--es", str(tmp_path / "e"))
    assert "unknown strategy 'nope'" in out and all(f"'{n}'" in out for n in registry.names())
    out = refused(
        "eval", str(data), "--strategy", "bm25,dense", "--heads", "toy", "--es", str(tmp_path / "e")
    )
    assert "--heads applies only to the strategies multihead, multihead-hybrid" in out


@pytest.mark.parametrize(
    ("strategy", "flag", "takers"),
    [
        ("hybrid", ["--show-plan"], "multisection"),
        ("bm25", ["--crossencoder", "cross-encoder/ms-marco-MiniLM-L-6-v2"], "multisection"),
        ("direct", ["--heads", "toy"], "multihead, multihead-hybrid"),
        ("multisection", ["--explain"], "bm25, dense"),
    ],
)
def test_an_option_of_other_strategies_is_refused(strategy, flag, takers, tmp_path):
    out = refused("search", "aspirin", "--strategy", strategy, *flag, "--es", str(tmp_path / "e"))
    assert f"{flag[0]} applies only to the strategies {takers}" in out and repr(strategy) in out
    assert not (tmp_path / "e").exists()  # refused before the target was touched


@pytest.mark.parametrize("question", ["", "   ", "\t\n"])
@pytest.mark.parametrize("command", ["search", "query"])
def test_an_empty_question_is_refused(command, question, tmp_path):
    out = refused(command, question, "--strategy", "bm25", "--es", str(tmp_path / "e"))
    assert "is empty" in out


def test_template_is_refused_where_nothing_can_be_stored():
    for name in ("multisection", "multihead"):
        out = refused("query", "aspirin", "--strategy", name, "--format", "template")
        assert "--format template applies only to the strategies bm25, dense" in out


@pytest.mark.slow
def test_eval_with_missing_heads_fails_before_any_strategy_runs(world):
    data, engine, _ = world
    out = refused("eval", str(data), "--strategy", "bm25,multihead", "--heads", "nope", "--es", str(engine))
    assert "no heads named 'nope'" in out and "bm25: nDCG@10" not in out
