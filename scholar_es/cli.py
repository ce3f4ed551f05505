"""The ``scholar-es`` command line."""

from __future__ import annotations

import sys

import click

from scholar_es.client import default_target
from scholar_es.errors import ScholarEsError

TARGET_HELP = ("http(s):// URL of an Elasticsearch cluster, or a directory for the embedded engine "
               "[default: $SCHOLAR_ES_URL, else ./.scholar-es]")


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


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
    bar = tqdm(unit=" papers", disable=quiet, file=sys.stderr, dynamic_ncols=True)

    def progress(papers: int, chunks: int) -> None:
        bar.update(papers - bar.n)
        bar.set_postfix(chunks=chunks, refresh=False)

    def report(message: str) -> None:
        bar.clear()
        click.echo(f"rejected: {message}", err=True)
        bar.refresh()

    try:
        es = connect(target)
        embedder = Embedder(model or DEFAULT_MODEL, batch_size=batch_size)
        run = IndexRun(es, embedder, prefix=prefix, chunking=chunking, rebuild=rebuild,
                       on_error=report, on_progress=progress)
        summary = run.run(list(sources), fmt)
    except ScholarEsError as e:
        bar.close()
        _fail(str(e))
        return
    bar.close()
    click.echo(summary.line())
    click.echo(f"indices: {', '.join(f'{prefix}{k} -> {v}' for k, v in summary.indices.items())} ({target})")
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

    try:
        es = connect(target or default_target())
    except ScholarEsError as e:
        _fail(str(e))
        return
    sys.exit(1 if run_console(es, file, sys.stdout) else 0)


if __name__ == "__main__":
    main()
