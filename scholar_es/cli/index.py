"""``scholar-es index``, ``indices`` and ``delete``: build, list and delete the scholar-es indices."""

from __future__ import annotations

import sys

import click

from scholar_es.cli.options import backend_option, fail, run_body, target_option
from scholar_es.client import default_target, display_target, is_url


@click.command("index")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Input format and the keys it reads: auto (told by the first records' keys); jsonl (ours: "
    "id, title, abstract, authors, year, venue, sections[].heading/type/paragraphs/text, or S2ORC-like "
    "paper_id and body_text[].section/text); beir (corpus.jsonl: _id, title, text); qasper "
    "(paper_id, title, abstract, sections[].section_name/paragraphs); pubmedqa (paper_id, title, "
    "year, sections[].section_name/text).",
)
@target_option
@click.option("--chunking", default="paragraph", show_default=True, help="paragraph or window.")
@click.option("--model", default=None, help="Embedding model [default: all-MiniLM-L6-v2, shipped offline].")
@click.option(
    "--batch-size",
    default=None,
    type=int,
    help="Texts per model call [default: 32 with torch, 8 with onnx/onnx-int8: onnxruntime pays for "
    "every padded token].",
)
@click.option("--prefix", default="", help="Prefix of the index aliases (<prefix>papers, <prefix>chunks).")
@click.option("--rebuild", is_flag=True, help="Build new index versions and swap the aliases when done.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@backend_option
def index_cmd(sources, fmt, target, chunking, model, batch_size, prefix, rebuild, quiet, backend) -> None:
    """Index papers from SOURCES (files or BEIR directories) as section-tagged chunks.

    Bad records are reported with file, line and reason, counted, and skipped; the exit
    status is 1 when any record was rejected, 0 otherwise. Keys the format does not read are
    reported once per file on stderr (a `warning:` line with the keys, the number of records
    holding them and, when the records look like another format, the --format to use); they
    do not change the exit status. Rerunning updates documents in place (ids are
    deterministic), so nothing is duplicated. Ctrl-C stops the run and says what was kept (exit
    status 130): a first build publishes nothing, and the embeddings computed so far stay in the
    cache, so a rerun reuses them.
    """
    from tqdm import tqdm

    from indexer.chunker import CHUNKING_MODES
    from indexer.embedder import DEFAULT_MODEL, Embedder
    from indexer.pipeline import IndexInterrupted, IndexRun, count_records
    from indexer.readers import FORMATS
    from scholar_es.client import connect
    from scholar_es.errors import choices

    if fmt != "auto" and fmt not in FORMATS:
        fail(f"unknown --format {fmt!r}; use 'auto' or one of {choices(FORMATS)}")
    if chunking not in CHUNKING_MODES:
        fail(f"unknown --chunking {chunking!r}; use one of {choices(CHUNKING_MODES)}")
    target = target or default_target()
    # the bar appears once the target answered, so a connection error prints no empty bar
    bar = tqdm(unit=" papers", disable=True, file=sys.stderr)
    run = None

    def progress(papers: int, chunks: int) -> None:
        done = papers + (run.summary.rejected if run else 0)  # the total counts every record
        bar.update(done - bar.n)
        bar.set_postfix(chunks=chunks, refresh=False)

    def report(message: str) -> None:
        bar.clear()
        click.echo(f"rejected: {message}", err=True)
        bar.refresh()

    def warn(message: str) -> None:
        bar.clear()
        click.echo(f"warning: {message}", err=True)
        bar.refresh()

    def stage(message: str) -> None:
        if not quiet:
            bar.clear()
            click.echo(message, err=True)
            bar.refresh()

    def body():
        nonlocal bar, run
        es = connect(target)
        es.info()  # an unreachable cluster fails now, before the model loads
        embedder = Embedder(model or DEFAULT_MODEL, batch_size=batch_size, backend=backend)
        if not quiet:
            click.echo(
                f"loading the embedding model {embedder.name} (up to a minute the first time) "
                f"with the {embedder.backend} backend ...",
                err=True,
            )
        embedder.dims  # noqa: B018 - loads the model now, so the bar below measures indexing alone
        bar = tqdm(
            total=count_records(sources),
            unit=" papers",
            disable=True if quiet else None,  # None: no bar when stderr is not a terminal (a log)
            file=sys.stderr,
            dynamic_ncols=True,
        )
        run = IndexRun(
            es,
            embedder,
            prefix=prefix,
            chunking=chunking,
            rebuild=rebuild,
            on_error=report,
            on_progress=progress,
            on_stage=stage,
            on_warning=warn,
        )
        try:
            return run.run(list(sources), fmt)
        finally:
            bar.close()

    try:
        summary = run_body(body)
    except IndexInterrupted as e:
        click.echo(f"scholar-es index: {e}", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo(
            "scholar-es index: interrupted before any paper was indexed; nothing was written", err=True
        )
        sys.exit(130)
    click.echo(summary.line())
    click.echo(
        f"indices: {', '.join(f'{prefix}{k} -> {v}' for k, v in summary.indices.items())} "
        f"({display_target(target)})"
    )
    if summary.cleaned:
        click.echo(f"deleted half-built versions a killed run left: {', '.join(summary.cleaned)}")
    if summary.pruned:
        click.echo(f"deleted versions older than the previous one: {', '.join(summary.pruned)}")
    sys.exit(1 if summary.rejected else 0)


@click.command("indices")
@target_option
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def indices_cmd(target, as_json) -> None:
    """List the scholar-es indices: each alias's versions (current, previous, building), with their
    document counts, embedding model, chunking and BM25 similarity settings."""
    import json

    from indexer.manage import format_table, list_indices
    from scholar_es.client import connect

    target = target or default_target()
    rows = run_body(lambda: list_indices(connect(target, must_exist=not is_url(target))))
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        click.echo(f"{display_target(target)}:")
        click.echo(format_table(rows))


@click.command("delete")
@click.argument("names", nargs=-1, required=True)
@target_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def delete_cmd(names, target, yes) -> None:
    """Delete scholar-es indices. Each NAME is an alias (chunks: all its versions), a prefix
    (scifact-: its papers and chunks) or one version (chunks-v1). Indices scholar-es did not
    create are refused. Asks for confirmation unless --yes."""
    from indexer.manage import delete_indices, resolve_delete
    from scholar_es.client import connect

    target = target or default_target()
    es = run_body(lambda: connect(target, must_exist=not is_url(target)))
    chosen = run_body(lambda: resolve_delete(es, list(names)))
    click.echo(f"{display_target(target)}: {len(chosen)} indices: {', '.join(chosen)}")
    if not yes and not click.confirm("delete them?", default=False):
        click.echo("nothing deleted")
        sys.exit(1)
    run_body(lambda: delete_indices(es, chosen))
    click.echo(f"deleted {', '.join(chosen)}")
