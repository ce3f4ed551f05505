"""What the commands share: option groups, help texts and how a command fails.

A command family (:mod:`scholar_es.cli.index`, :mod:`~scholar_es.cli.search`,
:mod:`~scholar_es.cli.evaluate`, :mod:`~scholar_es.cli.heads`, :mod:`~scholar_es.cli.serve`)
takes its options from here: :data:`target_option` (``--es``), :func:`backend_option`
(``--backend``), :func:`dataset_options` (DATASET, ``--format``, ``--split``), and :func:`search_options`, the options of ``query`` and ``search``, which reach
the command as ONE :class:`SearchArgs` that makes the
:class:`~querybuilder.request.SearchRequest` handed to the strategy (pyserini's
``define_search_args`` is the model). :func:`run_body` runs a command body: our errors and cluster
errors become one line on stderr and exit status 2.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click

from querybuilder.registry import names as strategy_names
from querybuilder.request import SearchRequest
from scholar_es.errors import ScholarEsError, disk_full_message

TARGET_HELP = (
    "http(s):// URL of an Elasticsearch cluster, or a directory for the embedded engine "
    "[default: $SCHOLAR_ES_URL, else ./.scholar-es]"
)

PROFILE_HELP = (
    "A profile name (default; the shipped tuned-qasper-train, tuned-scifact-train, or a short "
    "form such as tuned-qasper) or a profile JSON file (e.g. from scholar-es tune)."
)


_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def cluster_error(e: Exception) -> str | None:
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


def run_body(fn: Callable[[], _T]) -> _T:
    """Run a command body: our errors and cluster errors become one line and exit status 2."""
    try:
        return fn()
    except ScholarEsError as e:
        fail(str(e))
    except Exception as e:
        message = cluster_error(e) or disk_full_message(e)
        if message is None:
            raise
        fail(message)


BACKEND_HELP = (
    "Embedding backend: torch (sentence-transformers), onnx (exported once to ONNX, onnxruntime; "
    "same vectors, faster, no torch import), onnx-int8 (int8-quantized: faster again, slightly "
    "different vectors) or auto (onnx when onnxruntime is installed, else torch) "
    "[default: $SCHOLAR_ES_BACKEND or auto]."
)


#: ``--es TARGET``: the cluster or the embedded engine a command works on
target_option = click.option("--es", "target", default=None, help=TARGET_HELP)


def backend_option(fn: _F) -> _F:
    return click.option("--backend", default=None, help=BACKEND_HELP)(fn)


def dataset_options(
    *, format_help: str, split_help: str, split: str | None = "train", required: bool = True
) -> Callable[[_F], _F]:
    """DATASET (a judged dataset: a file or a BEIR directory), ``--format`` and ``--split``
    (``required`` False: DATASET may be left out; the command says when it needs one)."""

    def add(fn: _F) -> _F:
        fn = click.option("--split", default=split, show_default=split is not None, help=split_help)(fn)
        fn = click.option("--format", "fmt", default="auto", show_default=True, help=format_help)(fn)
        return click.argument("dataset", type=click.Path(exists=True), required=required)(fn)

    return add


def use_backend(backend: str | None) -> None:
    """Make ``backend`` the default of every embedder this process (and its workers) creates."""
    if backend is not None:
        import os

        from indexer.embedder import BACKEND_ENV
        from indexer.onnx_backend import check_backend

        try:
            check_backend(backend)
        except ScholarEsError as e:
            fail(str(e))
        os.environ[BACKEND_ENV] = backend


def filters_of(year_from, year_to, venues, paper_ids, sections) -> dict | None:
    f: dict = {}
    if year_from is not None:
        f["year_from"] = year_from
    if year_to is not None:
        f["year_to"] = year_to
    if venues:
        f["venues"] = list(venues)
    if paper_ids:
        f["paper_ids"] = list(paper_ids)
    if sections:
        f["section_types"] = list(sections)
    return f or None


@dataclass(frozen=True)
class SearchArgs:
    """The options :func:`search_options` adds, as given on the command line."""

    strategy: str
    profile: str | None
    size: int
    from_: int
    papers: bool
    prefix: str
    filters: dict | None
    heads: str | None
    backend: str | None

    def request(self, question: str, **fields: Any) -> SearchRequest:
        """The request for ``question`` with these options (the profile loaded now, unless
        ``fields`` gives one) and ``fields`` (more of SearchRequest's, or others in their place)."""
        from querybuilder.profiles import load_profile

        given: dict[str, Any] = {
            "size": self.size,
            "from_": self.from_,
            "papers": self.papers,
            "filters": self.filters,
            "prefix": self.prefix,
            "heads": self.heads,
            **fields,
        }
        if "profile" not in given:
            given["profile"] = load_profile(self.profile)
        return SearchRequest(question, **given)


#: the options search_options adds, in the order --help lists them
_SEARCH_OPTIONS = [
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
        "--size",
        default=10,
        show_default=True,
        type=int,
        help="Hits (or papers with --papers). Across papers each paper gives at most the profile's "
        'per_paper_cap chunks (default 5; set it with --profile FILE holding {"per_paper_cap": N}, '
        "0 = no cap); inside one paper (a single --paper-id) the search returns SIZE chunks.",
    ),
    click.option(
        "--from",
        "from_",
        default=0,
        show_default=True,
        type=click.IntRange(min=0),
        help="Hits (or papers with --papers) to skip: the page starts there; --from + --size at most "
        "10000 (index.max_result_window). Not with multisection.",
    ),
    click.option("--papers", is_flag=True, help="Paper-level view: top papers, each with its best chunks."),
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


def search_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by ``query`` and ``search``; the command gets them as one
    :class:`SearchArgs`, keyword ``search``."""

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        given = {
            k: kwargs.pop(k)
            for k in ("strategy", "profile", "size", "from_", "papers", "prefix", "heads", "backend")
        }
        where = {k: kwargs.pop(k) for k in ("year_from", "year_to", "venues", "paper_ids", "sections")}
        return fn(*args, search=SearchArgs(filters=filters_of(**where), **given), **kwargs)

    for opt in reversed(_SEARCH_OPTIONS):
        command = opt(command)
    return command
