"""The ``scholar-es`` command line."""

from __future__ import annotations

import sys

import click

from querybuilder.strategies import names as strategy_names
from scholar_es.client import default_target, display_target, is_url
from scholar_es.errors import ScholarEsError

TARGET_HELP = (
    "http(s):// URL of an Elasticsearch cluster, or a directory for the embedded engine "
    "[default: $SCHOLAR_ES_URL, else ./.scholar-es]"
)

PROFILE_HELP = (
    "A profile name (default; the shipped tuned-qasper-train, tuned-scifact-train, or a short "
    "form such as tuned-qasper) or a profile JSON file (e.g. from scholar-es tune)."
)


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
@click.version_option(package_name="scholar-es", prog_name="scholar-es")
def main() -> None:
    """Scientific-literature search inside Elasticsearch (or the embedded engine)."""


BACKEND_HELP = (
    "Embedding backend: torch (sentence-transformers), onnx (exported once to ONNX, onnxruntime; "
    "same vectors, faster, no torch import), onnx-int8 (int8-quantized: faster again, slightly "
    "different vectors) or auto (onnx when onnxruntime is installed, else torch) "
    "[default: $SCHOLAR_ES_BACKEND or auto]."
)


def _backend_option(fn):
    return click.option("--backend", default=None, help=BACKEND_HELP)(fn)


def _use_backend(backend: str | None) -> None:
    """Make ``backend`` the default of every embedder this process (and its workers) creates."""
    if backend is not None:
        import os

        from indexer.embedder import BACKEND_ENV
        from indexer.onnx_backend import check_backend

        try:
            check_backend(backend)
        except ScholarEsError as e:
            _fail(str(e))
        os.environ[BACKEND_ENV] = backend


@main.command("index")
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Input format: auto, jsonl (ours), beir, qasper or pubmedqa.",
)
@click.option("--es", "target", default=None, help=TARGET_HELP)
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
@_backend_option
def index_cmd(sources, fmt, target, chunking, model, batch_size, prefix, rebuild, quiet, backend) -> None:
    """Index papers from SOURCES (files or BEIR directories) as section-tagged chunks.

    Bad records are reported with file, line and reason, counted, and skipped; the exit
    status is 1 when any record was rejected, 0 otherwise. Rerunning updates documents in
    place (ids are deterministic), so nothing is duplicated.
    """
    from tqdm import tqdm

    from indexer.chunker import CHUNKING_MODES
    from indexer.embedder import DEFAULT_MODEL, Embedder
    from indexer.pipeline import IndexRun, count_records
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
    run = None

    def progress(papers: int, chunks: int) -> None:
        done = papers + (run.summary.rejected if run else 0)  # the total counts every record
        bar.update(done - bar.n)
        bar.set_postfix(chunks=chunks, refresh=False)

    def report(message: str) -> None:
        bar.clear()
        click.echo(f"rejected: {message}", err=True)
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
            disable=quiet,
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
        )
        try:
            return run.run(list(sources), fmt)
        finally:
            bar.close()

    summary = _run(body)
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


@main.command("indices")
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def indices_cmd(target, as_json) -> None:
    """List the scholar-es indices: each alias's versions (current, previous, building), with their
    document counts, embedding model, chunking and BM25 similarity settings."""
    import json

    from indexer.manage import format_table, list_indices
    from scholar_es.client import connect

    target = target or default_target()
    rows = _run(lambda: list_indices(connect(target, must_exist=not is_url(target))))
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        click.echo(f"{display_target(target)}:")
        click.echo(format_table(rows))


@main.command("delete")
@click.argument("names", nargs=-1, required=True)
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def delete_cmd(names, target, yes) -> None:
    """Delete scholar-es indices. Each NAME is an alias (chunks: all its versions), a prefix
    (scifact-: its papers and chunks) or one version (chunks-v1). Indices scholar-es did not
    create are refused. Asks for confirmation unless --yes."""
    from indexer.manage import delete_indices, resolve_delete
    from scholar_es.client import connect

    target = target or default_target()
    es = _run(lambda: connect(target, must_exist=not is_url(target)))
    chosen = _run(lambda: resolve_delete(es, list(names)))
    click.echo(f"{display_target(target)}: {len(chosen)} indices: {', '.join(chosen)}")
    if not yes and not click.confirm("delete them?", default=False):
        click.echo("nothing deleted")
        sys.exit(1)
    _run(lambda: delete_indices(es, chosen))
    click.echo(f"deleted {', '.join(chosen)}")


@main.command("console")
@click.argument("file", required=False, type=click.File("r", errors="surrogateescape"), default="-")
@click.option("--es", "target", default=None, help=TARGET_HELP)
def console_cmd(file, target) -> None:
    """Run Kibana dev console requests from FILE (default: standard input).

    Each request is a ``METHOD path`` line followed by an optional JSON body (NDJSON for
    _bulk and _msearch); it ends at a blank line, the next request line or the end of the
    input, runs at once, and its response is printed as one JSON line (errors included).
    The same file runs against the embedded engine and a real cluster. The exit status is 1
    when any request failed.
    """
    from scholar_es.client import connect
    from scholar_es.engine.rest.console import run_console

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
        click.option(
            "--strategy",
            default="hybrid",
            show_default=True,
            help=f"One of {', '.join(strategy_names())}. rrf/linear need an Enterprise license on a "
            "cluster; direct, multihead and multihead-hybrid route the question's vector through "
            "trained heads (--heads); multisection splits the question into sections.",
        ),
        click.option("--profile", "profile", default=None, help=PROFILE_HELP),
        click.option(
            "--size", default=10, show_default=True, type=int, help="Hits (or papers with --papers)."
        ),
        click.option(
            "--papers", is_flag=True, help="Paper-level view: top papers, each with its best chunks."
        ),
        click.option("--prefix", default="", help="Prefix of the index aliases."),
        click.option("--year-from", type=int, default=None, help="Only papers from this year on."),
        click.option("--year-to", type=int, default=None, help="Only papers up to this year."),
        click.option("--venue", "venues", multiple=True, help="Only these venues (repeatable)."),
        click.option("--paper-id", "paper_ids", multiple=True, help="Only these papers (repeatable)."),
        click.option("--section", "sections", multiple=True, help="Only these section types (repeatable)."),
        click.option(
            "--heads",
            "heads",
            default=None,
            help="Heads for multihead and multihead-hybrid (trained with `scholar-es heads train`) "
            "[default: 'default'].",
        ),
        click.option("--backend", default=None, help=BACKEND_HELP),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@main.command("query")
@click.argument("question")
@_search_options
@click.option("--format", "fmt", default="json", show_default=True, help="json, console or template.")
@click.option(
    "--es",
    "target",
    default=None,
    help="Embed with the model recorded in this target's index (checks it); default: the default model.",
)
def query_cmd(
    question,
    strategy,
    profile,
    size,
    papers,
    prefix,
    year_from,
    year_to,
    venues,
    paper_ids,
    sections,
    heads,
    backend,
    fmt,
    target,
) -> None:
    """Print the Elasticsearch DSL for QUESTION (nothing is searched).

    --format console prints Kibana dev console text (``GET chunks/_search`` + body) that
    ``scholar-es console`` runs too; --format template prints a stored mustache search template
    that a backend calls with the question text, its vector and a size. Strategies that send
    several searches (rrf-client, multisection) print all of them: a list of bodies, or one
    ``GET chunks/_msearch`` in console form. An empty QUESTION is refused (exit status 2).
    """
    _use_backend(backend)
    from querybuilder.profiles import load_profile
    from querybuilder.render import show_query
    from scholar_es.client import connect

    def body():
        from querybuilder.strategies import SearchRequest, get

        strat = get(strategy)
        strat.check(SearchRequest(question=question, heads=heads))  # before connecting
        strat.check_format(fmt)
        return show_query(
            question,
            strategy=strategy,
            fmt=fmt,
            profile=load_profile(profile),
            es=connect(target, must_exist=True) if target else None,
            size=size,
            papers=papers,
            prefix=prefix,
            filters=_filters(year_from, year_to, venues, paper_ids, sections),
            heads=heads,
        )

    click.echo(_run(body), nl=False)


@main.command("search")
@click.argument("question", required=False)
@_search_options
@click.option("--es", "target", default=None, help=TARGET_HELP)
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
    question,
    strategy,
    profile,
    size,
    papers,
    prefix,
    year_from,
    year_to,
    venues,
    paper_ids,
    sections,
    heads,
    backend,
    target,
    as_json,
    explain,
    show_plan,
    crossencoder,
    queries_file,
    run_out,
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
    _use_backend(backend)
    if queries_file is not None:
        if question is not None:
            _fail("give either QUESTION or --queries FILE, not both")
        _search_batch(
            queries_file,
            run_out,
            strategy,
            profile,
            size,
            papers,
            prefix,
            target,
            _filters(year_from, year_to, venues, paper_ids, sections),
        )
        return
    if question is None:
        _fail("missing QUESTION (or --queries FILE for a batch)")
    if run_out is not None:
        _fail("--run-out goes with --queries FILE")
    from querybuilder.profiles import load_profile
    from querybuilder.render import dumps
    from querybuilder.strategies import SearchRequest, get
    from scholar_es.client import connect

    def body():
        strat = get(strategy)
        request = SearchRequest(
            question=question,
            profile=load_profile(profile),
            size=size,
            papers=papers,
            filters=_filters(year_from, year_to, venues, paper_ids, sections),
            prefix=prefix,
            heads=heads,
            explain=explain,
            show_plan=show_plan,
            crossencoder=crossencoder,
        )
        strat.check(request)  # the question and the per-strategy options, before connecting
        es = connect(target or default_target(), must_exist=True)
        native = strat.execute(es, strat.prepare(es, request))
        return dumps(strat.as_dict(native, request)) if as_json else strat.render(native, request)

    click.echo(_run(body))


def _parse_size(text: str) -> int:
    """``100mb``, ``512kb``, ``1gb`` or a number of bytes."""
    units = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}
    t = text.strip().lower()
    for unit in ("kb", "mb", "gb", "b"):
        if t.endswith(unit) and t[: -len(unit)].strip().isdigit():
            return int(t[: -len(unit)]) * units[unit]
    if t.isdigit():
        return int(t)
    raise click.BadParameter(f"{text!r} is not a size; use e.g. 100mb, 512kb or a number of bytes")


@main.command("serve")
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback only by default)."
)
@click.option("--port", default=9200, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes.")
@click.option("--model", default=None, help="Embedding model [default: all-MiniLM-L6-v2, shipped offline].")
@click.option("--profile", default=None, help="The profile searches use (a built-in name or a JSON file).")
@click.option(
    "--max-body", default="100mb", show_default=True, help="Largest request body accepted (e.g. 100mb)."
)
@click.option(
    "--max-header-size",
    default="16kb",
    show_default=True,
    help="Largest request headers accepted, all lines together (Elasticsearch's http.max_header_size); "
    "more is answered 400 too_long_http_header_exception.",
)
@click.option(
    "--max-in-flight",
    default=None,
    help="In-flight requests breaker: twice the body bytes a process holds at once may not pass this; "
    "a request that would is answered 429 circuit_breaking_exception [default: a quarter of the memory].",
)
@click.option("--log-level", default="info", show_default=True, help="uvicorn log level (warning: quieter).")
@_backend_option
def serve_cmd(
    target, host, port, workers, model, profile, max_body, max_header_size, max_in_flight, log_level, backend
) -> None:
    """Serve search over HTTP from one long-lived process (the model loaded once).

    \b
    /_scholar/search, query, multisection   the search API (JSON)
    /_scholar/strategies, health            what it offers, whether it is ready
    /_scholar/openapi.json                  the search API's schema
    /_scholar/ui                            the search page
    /, /_bulk, /{index}/_search, ...        Elasticsearch's REST API (embedded engine only)

    With $SCHOLAR_ES_SERVE_API_KEY set, every route needs that key (Authorization: ApiKey KEY,
    or HTTP Basic with the key as password); set but empty, it is refused. SIGTERM (exit 0) or
    Ctrl-C stop it after the requests in flight; workers exit when their master dies.
    """
    _use_backend(backend)  # workers inherit it: their embedders default to it
    import os

    from scholar_es.serve.run import serve
    from scholar_es.serve.state import API_KEY_ENV, api_key_from_env

    _run(api_key_from_env)  # set but empty: one line, exit 2, before anything starts
    size = _parse_size(max_body)
    header_size = _parse_size(max_header_size)
    in_flight = None if max_in_flight is None else _parse_size(max_in_flight)
    target = target or default_target()
    if not is_url(target):
        from scholar_es.client import connect

        _run(lambda: connect(target))  # a file or a bad scheme: one line, exit 2, before uvicorn starts
    if host not in ("127.0.0.1", "localhost", "::1") and not os.environ.get(API_KEY_ENV):
        click.echo(
            f"warning: listening on {host} without ${API_KEY_ENV}: anyone who reaches it can search "
            "and (with the embedded engine) write",
            err=True,
        )
    engine = "Elasticsearch REST API at /" if not is_url(target) else "cluster: its REST API stays there"
    page = f"search page http://{host}:{port}/_scholar/ui" if port else "port chosen by the system"
    click.echo(f"scholar-es serve: {display_target(target)} ({engine}); {page}", err=True)
    _run(
        lambda: serve(
            target,
            host=host,
            port=port,
            workers=workers,
            model=model,
            max_body=size,
            max_header_size=header_size,
            max_in_flight=in_flight,
            profile=profile,
            log_level=log_level,
        )
    )


def _search_batch(queries_file, run_out, strategy, profile, size, papers, prefix, target, filters) -> None:
    import time

    from tqdm import tqdm

    from indexer.embedder import DEFAULT_MODEL, Embedder
    from querybuilder.profiles import load_profile
    from querybuilder.run import index_meta
    from querybuilder.strategies import SearchRequest, get
    from scholar_es.batch import BatchSummary, read_queries, run_lines, write_atomically
    from scholar_es.client import connect

    rejected = []

    def report(e) -> None:
        rejected.append(e)
        click.echo(f"rejected: {e}", err=True)

    def body():
        strat = get(strategy)  # an unknown name lists the registry's strategies
        queries = read_queries(queries_file, report)
        es = connect(target or default_target(), must_exist=True)
        prof = load_profile(profile)
        meta = index_meta(es, f"{prefix}chunks")
        embedder = Embedder(meta.get("embedding_model") or DEFAULT_MODEL)  # loaded once, for every question
        start = time.perf_counter()
        lines: list[str] = []
        for qid, text in tqdm(queries, unit=" questions", file=sys.stderr, dynamic_ncols=True):
            request = SearchRequest(
                question=text,
                profile=prof,
                size=size,
                papers=papers,
                filters=filters,
                prefix=prefix,
                embedder=embedder,
            )
            result = strat.search(es, request)
            lines += run_lines(qid, result, papers=papers, tag=strategy)
        if run_out:
            write_atomically(run_out, lines)
        else:
            click.echo("\n".join(lines))
        return BatchSummary(len(queries), len(rejected), len(lines), time.perf_counter() - start)

    summary = _run(body)
    click.echo(summary.line() + (f"; run file {run_out}" if run_out else ""), err=True)
    sys.exit(1 if summary.rejected else 0)


@main.command("eval")
@click.argument("dataset", type=click.Path(exists=True))
@click.option("--format", "fmt", default="auto", show_default=True, help="beir or qasper (auto detects).")
@click.option(
    "--split",
    default=None,
    help="The qrels split to evaluate; needed when the dataset has several (they are listed).",
)
@click.option(
    "--strategy",
    "strategies",
    default="bm25,dense,hybrid",
    show_default=True,
    help=f"Comma-separated strategies to compare, any of {', '.join(strategy_names())}.",
)
@click.option(
    "--heads",
    default=None,
    help="Heads for multihead and multihead-hybrid (trained with `scholar-es heads train`, stored "
    "under the dataset's prefix) [default: 'default'].",
)
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option(
    "--scope",
    default="corpus",
    show_default=True,
    help="corpus (search everything) or paper (QASPER: each question within its own paper).",
)
@click.option(
    "--limit",
    type=int,
    default=None,
    help="Evaluate the first N judged queries only; the corpus indexed for them is bounded too "
    "(--corpus-sample) unless the whole corpus is already indexed.",
)
@click.option(
    "--corpus-sample",
    type=int,
    default=500,
    show_default=True,
    help="With --limit: index the documents those queries need plus this many others (a fixed sample).",
)
@click.option("--full-corpus", is_flag=True, help="With --limit: index the whole corpus anyway.")
@click.option("--json", "json_out", default=None, help="Write {strategy: {metric: value}} here.")
@click.option("--plot", "plot_out", default=None, help="Write a PNG comparison plot here.")
@click.option("--profile", default=None, help=PROFILE_HELP)
@click.option(
    "--prefix",
    default=None,
    help="Index alias prefix [default: <name>-<split>- for QASPER, <name>- for BEIR].",
)
@click.option(
    "--chunking",
    default="paragraph",
    show_default=True,
    help="paragraph or window (as `scholar-es index`); a window index gets its own prefix (<prefix>window-).",
)
@click.option("--quiet", is_flag=True, help="No progress bars or progress lines (the report still prints).")
@_backend_option
def eval_cmd(
    dataset,
    fmt,
    split,
    strategies,
    heads,
    target,
    scope,
    limit,
    corpus_sample,
    full_corpus,
    json_out,
    plot_out,
    profile,
    prefix,
    chunking,
    quiet,
    backend,
) -> None:
    """Evaluate strategies on a judged DATASET: nDCG@10, MRR@10, P@1/3/10, Recall@10/100, latency.

    The dataset is indexed into the target the first time and reused afterwards; queries with
    no judgments are skipped and counted, never averaged in as zero.
    """
    _use_backend(backend)
    from scholar_es.evaluation.command import run_eval

    _run(
        lambda: run_eval(
            dataset,
            fmt=fmt,
            split=split,
            strategies=strategies,
            target=target,
            scope=scope,
            limit=limit,
            json_out=json_out,
            plot_out=plot_out,
            profile=profile,
            prefix=prefix,
            heads=heads,
            chunking=chunking,
            progress=not quiet,
            corpus_sample=corpus_sample,
            full_corpus=full_corpus,
        )
    )


@main.command("tune")
@click.argument("dataset", type=click.Path(exists=True))
@click.option("--format", "fmt", default="auto", show_default=True, help="beir or qasper (auto detects).")
@click.option(
    "--split", default="train", show_default=True, help="The split to tune on (train only, by design)."
)
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--scope", default="corpus", show_default=True, help="corpus or paper (QASPER).")
@click.option("--limit", type=int, default=None, help="Tune on the first N judged queries only.")
@click.option("--papers", type=int, default=None, help="QASPER: tune on the first N papers of the split.")
@click.option(
    "--folds", type=int, default=5, show_default=True, help="Cross-validation folds for the report."
)
@click.option("--profile", default=None, help=f"The profile to start from. {PROFILE_HELP}")
@click.option("--out", "out_profile", default=None, help="Write the tuned profile JSON here.")
@click.option("--name", default=None, help="Name of the tuned profile.")
@click.option(
    "--allow-any-split",
    is_flag=True,
    help="Tune on a split not named train (only when that split is your training data).",
)
@click.option("--quiet", is_flag=True, help="No progress bars or progress lines (the report still prints).")
def tune_cmd(
    dataset,
    fmt,
    split,
    target,
    scope,
    limit,
    papers,
    folds,
    profile,
    out_profile,
    name,
    allow_any_split,
    quiet,
) -> None:
    """Tune profile parameters (hybrid weights, BM25 saturation, section multipliers) on a train split.

    Prints cross-validated gains and writes a profile that search, query and eval accept
    with --profile. Report the tuned profile on a split it did not see.
    """
    from scholar_es.evaluation.command import run_tune

    _run(
        lambda: run_tune(
            dataset,
            fmt=fmt,
            split=split,
            target=target,
            scope=scope,
            limit=limit,
            papers=papers,
            folds=folds,
            profile=profile,
            out_profile=out_profile,
            name=name,
            allow_any_split=allow_any_split,
            progress=not quiet,
        )
    )


@main.group("heads")
def heads_group() -> None:
    """Multi-head query projection: train, list and delete heads stored in the engine."""


@heads_group.command("train")
@click.argument("dataset", type=click.Path(exists=True))
@click.option("--format", "fmt", default="auto", show_default=True, help="beir or qasper.")
@click.option(
    "--split", default="train", show_default=True, help="The judged split whose pairs train the heads."
)
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--name", default="default", show_default=True, help="Name of the heads.")
@click.option(
    "--prefix", default=None, help="Alias prefix of the indexed corpus [default: <dataset>-<split>-]."
)
@click.option("--tau", type=float, default=0.1, show_default=True, help="Softmax temperature of the routing.")
@click.option(
    "--threshold",
    type=float,
    default=None,
    help="Confidence fallback: below this best-centroid similarity the direct vector is used.",
)
@click.option(
    "--alpha",
    type=float,
    default=1.0,
    show_default=True,
    help="Fallback blend: alpha*q + (1-alpha)*projected (1.0 = the direct vector).",
)
@click.option("--tune", is_flag=True, help="Tune the threshold on the training pairs (no-harm rule).")
def heads_train_cmd(dataset, fmt, split, target, name, prefix, tau, threshold, alpha, tune) -> None:
    """Train heads from the (question, answer) pairs of a judged DATASET and store them in the engine."""
    from scholar_es.client import connect
    from scholar_es.projection.train import train_heads

    def body():
        es = connect(target or default_target())
        return train_heads(
            es,
            dataset,
            fmt=fmt,
            split=split,
            name=name,
            prefix=prefix,
            tau=tau,
            threshold=threshold,
            alpha=alpha,
            tune=tune,
            on_warning=lambda m: click.echo(f"warning: {m}", err=True),
        )

    click.echo(_run(body).line())


@heads_group.command("list")
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--prefix", default="", help="Alias prefix.")
def heads_list_cmd(target, prefix) -> None:
    """List the heads stored in the target."""
    from scholar_es.client import connect
    from scholar_es.projection.store import list_heads

    for name in _run(lambda: list_heads(connect(target or default_target(), must_exist=True), prefix)):
        click.echo(name)


@heads_group.command("delete")
@click.argument("name")
@click.option("--es", "target", default=None, help=TARGET_HELP)
@click.option("--prefix", default="", help="Alias prefix.")
def heads_delete_cmd(name, target, prefix) -> None:
    """Delete the heads NAME (every stored version)."""
    from scholar_es.client import connect
    from scholar_es.projection.store import delete_heads

    deleted = _run(lambda: delete_heads(connect(target or default_target(), must_exist=True), name, prefix))
    click.echo(f"deleted {', '.join(deleted) if deleted else 'nothing'}")


if __name__ == "__main__":
    main()
