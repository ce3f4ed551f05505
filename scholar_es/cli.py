"""The ``scholar-es`` command line."""

from __future__ import annotations

import sys

import click

from scholar_es.client import default_target, display_target, is_url
from scholar_es.errors import ScholarEsError

TARGET_HELP = ("http(s):// URL of an Elasticsearch cluster, or a directory for the embedded engine "
               "[default: $SCHOLAR_ES_URL, else ./.scholar-es]")


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _cluster_error(e: Exception) -> str | None:
    """A one-line message for an Elasticsearch or connection error, else None."""
    from elasticsearch import ApiError, TransportError

    if isinstance(e, ApiError):
        err = e.body.get("error") if isinstance(e.body, dict) else None
        if isinstance(err, dict):
            return f"Elasticsearch answered {e.meta.status} {err.get('type')}: {err.get('reason')}"
        return f"Elasticsearch answered {e.meta.status}: {e.message}"
    if isinstance(e, TransportError):
        return f"cannot reach the cluster ({type(e).__name__}: {e.message}); check --es / $SCHOLAR_ES_URL"
    return None


def _run(fn):
    """Run a command body: our errors and cluster errors become one line and exit status 2."""
    try:
        return fn()
    except ScholarEsError as e:
        _fail(str(e))
    except Exception as e:
        message = _cluster_error(e)
        if message is None:
            raise
        _fail(message)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Scientific-literature search inside Elasticsearch (or the embedded engine)."""


@main.command("index")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--format", "fmt", default="auto", show_default=True,
              help="Input format: auto, jsonl (ours), beir, qasper or pubmedqa.")
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--chunking", default="paragraph", show_default=True, help="paragraph or window.")
@click.option("--model", default=None, help="Embedding model [default: all-MiniLM-L6-v2, shipped offline].")
@click.option("--batch-size", default=32, show_default=True, type=int, help="Texts per model call.")
@click.option("--prefix", default="", help="Prefix of the index aliases (<prefix>papers, <prefix>chunks).")
@click.option("--rebuild", is_flag=True, help="Build new index versions and swap the aliases when done.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def index_cmd(sources, fmt, target, chunking, model, batch_size, prefix, rebuild, quiet) -> None:
    """Index papers from SOURCES (files or BEIR directories) as section-tagged chunks.

    Bad records are reported with file, line and reason, counted, and skipped; the exit
    status is 1 when any record was rejected, 0 otherwise. Rerunning updates documents in
    place (ids are deterministic), so nothing is duplicated.
    """
    from tqdm import tqdm

    from indexer.chunker import CHUNKING_MODES
    from indexer.embedder import DEFAULT_MODEL, Embedder
    from indexer.pipeline import IndexRun
    from indexer.readers import FORMATS
    from scholar_es.client import connect
    from scholar_es.errors import choices

    if fmt != "auto" and fmt not in FORMATS:
        _fail(f"unknown --format {fmt!r}; use 'auto' or one of {choices(FORMATS)}")
    if chunking not in CHUNKING_MODES:
        _fail(f"unknown --chunking {chunking!r}; use one of {choices(CHUNKING_MODES)}")
    target = target or default_target()
    # the bar appears once the target answered, so a connection error prints no empty bar
    bar = tqdm(unit=" papers", disable=True, file=sys.stderr)

    def progress(papers: int, chunks: int) -> None:
        bar.update(papers - bar.n)
        bar.set_postfix(chunks=chunks, refresh=False)

    def report(message: str) -> None:
        bar.clear()
        click.echo(f"rejected: {message}", err=True)
        bar.refresh()

    def body():
        nonlocal bar
        es = connect(target)
        es.info()  # an unreachable cluster fails now, before the model loads
        embedder = Embedder(model or DEFAULT_MODEL, batch_size=batch_size)
        bar = tqdm(unit=" papers", disable=quiet, file=sys.stderr, dynamic_ncols=True)
        run = IndexRun(es, embedder, prefix=prefix, chunking=chunking, rebuild=rebuild,
                       on_error=report, on_progress=progress)
        try:
            return run.run(list(sources), fmt)
        finally:
            bar.close()

    summary = _run(body)
    click.echo(summary.line())
    click.echo(f"indices: {', '.join(f'{prefix}{k} -> {v}' for k, v in summary.indices.items())} "
               f"({display_target(target)})")
    sys.exit(1 if summary.rejected else 0)


@main.command("console")
@click.argument("file", required=False, type=click.File("r"), default="-")
@click.option("--es", "target", default=None, help=TARGET_HELP)
def console_cmd(file, target) -> None:
    """Run Kibana dev console requests from FILE (default: standard input).

    Each request is a ``METHOD path`` line followed by an optional JSON body (NDJSON for
    _bulk and _msearch); it ends at a blank line, the next request line or the end of the
    input, runs at once, and its response is printed as one JSON line (errors included).
    The same file runs against the embedded engine and a real cluster. The exit status is 1
    when any request failed.
    """
    from engine.console import run_console
    from scholar_es.client import connect

    es = _run(lambda: connect(target or default_target(), must_exist=not is_url(target or default_target())))
    sys.exit(1 if run_console(es, file, sys.stdout) else 0)



def _filters(year_from, year_to, venues, paper_ids, sections) -> dict | None:
    f: dict = {}
    if year_from is not None:
        f["year_min"] = year_from
    if year_to is not None:
        f["year_max"] = year_to
    if venues:
        f["venues"] = list(venues)
    if paper_ids:
        f["paper_ids"] = list(paper_ids)
    if sections:
        f["section_types"] = list(sections)
    return f or None


def _search_options(fn):
    """Options shared by ``query`` and ``search``."""
    opts = [
        click.option("--strategy", default="hybrid", show_default=True,
                     help="bm25, dense, hybrid, sections, expanded, rrf, rrf-client or linear "
                          "(rrf/linear need an Enterprise license on a cluster); search also takes "
                          "multisection."),
        click.option("--profile", "profile", default=None, help="A profile JSON file (see querybuilder/profiles.py)."),
        click.option("--size", default=10, show_default=True, type=int, help="Hits (or papers with --papers)."),
        click.option("--papers", is_flag=True, help="Paper-level view: top papers, each with its best chunks."),
        click.option("--prefix", default="", help="Prefix of the index aliases."),
        click.option("--year-from", type=int, default=None, help="Only papers from this year on."),
        click.option("--year-to", type=int, default=None, help="Only papers up to this year."),
        click.option("--venue", "venues", multiple=True, help="Only these venues (repeatable)."),
        click.option("--paper-id", "paper_ids", multiple=True, help="Only these papers (repeatable)."),
        click.option("--section", "sections", multiple=True, help="Only these section types (repeatable)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@main.command("query")
@click.argument("question")
@_search_options
@click.option("--format", "fmt", default="json", show_default=True, help="json, console or template.")
@click.option("--es", "target", default=None,
              help="Embed with the model recorded in this target's index (checks it); default: the default model.")
def query_cmd(question, strategy, profile, size, papers, prefix, year_from, year_to, venues, paper_ids, sections,
              fmt, target) -> None:
    """Print the Elasticsearch DSL for QUESTION (nothing is searched).

    --format console prints Kibana dev console text (``GET chunks/_search`` + body) that
    ``scholar-es console`` runs too; --format template prints a stored mustache search template
    that a backend calls with the question text, its vector and a size.
    """
    from querybuilder.profiles import load_profile
    from querybuilder.render import show_query
    from scholar_es.client import connect

    def body():
        es = connect(target, must_exist=True) if target else None
        return show_query(question, strategy=strategy, fmt=fmt, profile=load_profile(profile), es=es,
                          size=size, papers=papers, prefix=prefix,
                          filters=_filters(year_from, year_to, venues, paper_ids, sections))

    click.echo(_run(body), nl=False)


@main.command("search")
@click.argument("question")
@_search_options
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--explain", is_flag=True, help="Show each hit's score parts (BM25 per field, kNN, section multiplier).")
@click.option("--show-plan", is_flag=True,
              help="multisection: print the sections, each sub-query as console text and its candidates.")
@click.option("--crossencoder", default=None, help="multisection: re-score with this sentence-transformers CrossEncoder.")
def search_cmd(question, strategy, profile, size, papers, prefix, year_from, year_to, venues, paper_ids, sections,
               target, as_json, explain, show_plan, crossencoder) -> None:
    """Search QUESTION and print ranked results: paper, section type, score and a snippet.

    --strategy multisection splits the question into 1-5 focused sections, sends them in one
    _msearch, re-scores the merged candidates against the original question inside the engine,
    and prints the top papers (--size of them), each with up to 3 supporting chunks.
    """
    from querybuilder.profiles import load_profile
    from querybuilder.render import format_results
    from querybuilder.run import search
    from scholar_es.client import connect

    def body():
        es = connect(target or default_target(), must_exist=True)
        filters = _filters(year_from, year_to, venues, paper_ids, sections)
        if strategy == "multisection":
            from multisection.flow import multisection_search, render_result

            ms = multisection_search(es, question, profile=load_profile(profile), prefix=prefix, filters=filters,
                                     papers=size, show_plan=show_plan, crossencoder=crossencoder)
            return ms.model_dump_json(indent=2) if as_json else render_result(ms, show_plan=show_plan)
        result = search(es, question, strategy=strategy, profile=load_profile(profile), size=size, papers=papers,
                        explain=explain, prefix=prefix, filters=filters)
        return result.model_dump_json(indent=2) if as_json else format_results(result, explain=explain)

    click.echo(_run(body))


if __name__ == "__main__":
    main()
