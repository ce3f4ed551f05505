"""``scholar-es query`` and ``search``: one question (or a batch of them) through a strategy.

Both take :func:`~scholar_es.cli.options.search_options`; the command line becomes one
:class:`~querybuilder.request.SearchRequest` (:meth:`~scholar_es.cli.options.SearchArgs.request`)
that the strategy of the registry checks, prepares, and prints or sends.
"""

from __future__ import annotations

import sys

import click

from querybuilder.registry import get
from querybuilder.request import SearchRequest
from scholar_es.cli.options import SearchArgs, fail, run_body, search_options, target_option, use_backend
from scholar_es.client import default_target


@click.command("query")
@click.argument("question")
@search_options
@click.option("--format", "fmt", default="json", show_default=True, help="json, console or template.")
@click.option(
    "--es",
    "target",
    default=None,
    help="Embed with the model recorded in this target's index (checks it); default: the default model.",
)
def query_cmd(question: str, search: SearchArgs, fmt: str, target: str | None) -> None:
    """Print the Elasticsearch DSL for QUESTION (nothing is searched).

    --format console prints Kibana dev console text (``GET chunks/_search`` + body) that
    ``scholar-es console`` runs too; --format template prints a stored mustache search template
    that a backend calls with the question text, its vector and a size. Strategies that send
    several searches (rrf-client, multisection) print all of them: a list of bodies, or one
    ``GET chunks/_msearch`` in console form. An empty QUESTION is refused (exit status 2).
    """
    use_backend(search.backend)
    if search.from_:
        fail("--from pages the hits of `scholar-es search`; `query` prints the DSL of a whole ranking")
    from querybuilder.strategies import show_query
    from scholar_es.client import connect

    def body():
        strat = get(search.strategy)
        strat.check(SearchRequest(question=question, heads=search.heads))  # before connecting
        strat.check_format(fmt)
        request = search.request(question)
        es = connect(target, must_exist=True) if target else None
        return show_query(request, strategy=search.strategy, fmt=fmt, es=es)

    click.echo(run_body(body), nl=False)


@click.command("search")
@click.argument("question", required=False)
@search_options
@target_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the result as JSON: every hit with its full chunk text and paragraph ids, and the request.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Show each hit's score parts (BM25 per field, kNN, section multiplier); not with multisection.",
)
@click.option(
    "--show-plan",
    is_flag=True,
    help="multisection only: print the sections, each sub-query as console text and its candidates.",
)
@click.option(
    "--crossencoder",
    default=None,
    help="multisection only: re-score with this sentence-transformers CrossEncoder.",
)
@click.option(
    "--queries",
    "queries_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="Batch: search every question of this file (one a line, or BEIR queries.jsonl), model loaded once.",
)
@click.option(
    "--run-out",
    default=None,
    type=click.Path(dir_okay=False, writable=True),
    help="Batch: write the TREC run file here [default: standard output].",
)
def search_cmd(
    question: str | None,
    search: SearchArgs,
    target: str | None,
    as_json: bool,
    explain: bool,
    show_plan: bool,
    crossencoder: str | None,
    queries_file: str | None,
    run_out: str | None,
) -> None:
    """Search QUESTION and print ranked results: paper, section type, score and a snippet.

    --strategy multisection splits the question into 1-5 focused sections, sends them in one
    _msearch, re-scores the merged candidates against the original question inside the engine,
    and prints the top papers (--size of them), each with up to 3 supporting chunks.

    An empty or whitespace-only QUESTION is refused (exit status 2), as is an option the
    strategy does not take (--explain, --show-plan, --crossencoder, --heads).

    Batch mode: --queries FILE (one question a line, ids = line numbers; or BEIR queries.jsonl)
    searches every question with the model loaded once and writes a TREC run file (--run-out;
    doc ids are chunk ids, or paper ids with --papers). Bad lines are reported, counted and
    skipped; the exit status is 1 when any was.
    """
    use_backend(search.backend)
    if queries_file is not None:
        if question is not None:
            fail("give either QUESTION or --queries FILE, not both")
        if search.from_:
            fail("--from pages one question's hits; a batch run file ranks every question from its first hit")
        _search_batch(queries_file, run_out, search, target)
        return
    if question is None:
        fail("missing QUESTION (or --queries FILE for a batch)")
    if run_out is not None:
        fail("--run-out goes with --queries FILE")
    from querybuilder.render import dumps
    from scholar_es.client import connect

    def body():
        strat = get(search.strategy)
        request = search.request(question, explain=explain, show_plan=show_plan, crossencoder=crossencoder)
        strat.check(request)  # the question and the per-strategy options, before connecting
        es = connect(target or default_target(), must_exist=True)
        native = strat.execute(es, strat.prepare(es, request))
        return dumps(strat.as_dict(native, request)) if as_json else strat.render(native, request)

    click.echo(run_body(body))


def _search_batch(queries_file: str, run_out: str | None, search: SearchArgs, target: str | None) -> None:
    import time

    from tqdm import tqdm

    from indexer.embedder import DEFAULT_MODEL, Embedder
    from querybuilder.profiles import load_profile
    from querybuilder.run import index_meta
    from scholar_es.batch import BatchSummary, read_queries, run_lines, write_atomically
    from scholar_es.client import connect

    rejected = []

    def report(e) -> None:
        rejected.append(e)
        click.echo(f"rejected: {e}", err=True)

    def body():
        strat = get(search.strategy)  # an unknown name lists the registry's strategies
        queries = read_queries(queries_file, report)
        es = connect(target or default_target(), must_exist=True)
        prof = load_profile(search.profile)
        meta = index_meta(es, f"{search.prefix}chunks")
        embedder = Embedder(meta.get("embedding_model") or DEFAULT_MODEL)  # loaded once, for every question
        base = search.request("", profile=prof, embedder=embedder, heads=None)
        start = time.perf_counter()
        lines: list[str] = []
        for qid, text in tqdm(queries, unit=" questions", file=sys.stderr, dynamic_ncols=True, disable=None):
            result = strat.search(es, base.replace(question=text))
            lines += run_lines(qid, result, papers=search.papers, tag=search.strategy)
        if run_out:
            write_atomically(run_out, lines)
        else:
            click.echo("\n".join(lines))
        return BatchSummary(len(queries), len(rejected), len(lines), time.perf_counter() - start)

    summary = run_body(body)
    click.echo(summary.line() + (f"; run file {run_out}" if run_out else ""), err=True)
    sys.exit(1 if summary.rejected else 0)
