"""``scholar-es eval``: everything behind the command, so the CLI only parses options.

:func:`run_eval` loads the dataset, evaluates, prints what was evaluated and skipped plus the
markdown table to ``out``, and writes ``--json`` / ``--plot``. Errors are
:class:`~scholar_es.errors.ScholarEsError` subclasses with the fix in the message.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from scholar_es.evaluation.datasets import load_dataset
from scholar_es.evaluation.report import markdown_table, plot, write_json
from scholar_es.evaluation.runner import Evaluation, run_evaluation

DEFAULT_STRATEGIES = ("bm25", "dense", "hybrid")
#: splits ``tune`` accepts without ``allow_any_split``: tuning on what is reported would flatter it
TRAIN_SPLITS = ("train",)


#: with --limit, corpus documents indexed besides the judged ones (Dataset.bounded)
DEFAULT_CORPUS_SAMPLE = 500


def check_output_path(path: str | Path | None, option: str, *, plot: bool = False) -> None:
    """Refuse an output path that cannot be written, before any work (not after an hour's run)."""
    import os

    from scholar_es.errors import ConfigError

    if path is None:
        return
    p = Path(path).expanduser()
    if p.is_dir():
        raise ConfigError(f"{option} {str(path)!r} is a directory; give a file name, e.g. {p / 'out'}")
    folder = p.parent
    if not folder.is_dir():
        raise ConfigError(f"{option} {str(path)!r}: folder {str(folder)!r} does not exist; create it first")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"{option} {str(path)!r} is not writable; pick another path")
    if plot:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        types = FigureCanvasAgg.get_supported_filetypes()
        if p.suffix.lstrip(".").lower() not in types:
            raise ConfigError(
                f"{option} {str(path)!r}: the image type comes from the file name; end it with one of "
                f"{', '.join('.' + t for t in sorted(types))} (e.g. .png)"
            )


def parse_strategies(value: str | Sequence[str] | None) -> list[str]:
    """``"bm25,dense"`` (or a list) -> names; None -> :data:`DEFAULT_STRATEGIES`."""
    if value is None:
        return list(DEFAULT_STRATEGIES)
    parts = value.split(",") if isinstance(value, str) else [p for v in value for p in v.split(",")]
    return [p.strip() for p in parts if p.strip()]


def run_eval(
    dataset: str | Path,
    *,
    fmt: str = "auto",
    split: str | None = None,
    strategies: str | Sequence[str] | None = None,
    target: str | None = None,
    scope: str = "corpus",
    limit: int | None = None,
    json_out: str | Path | None = None,
    plot_out: str | Path | None = None,
    profile: str | Path | None = None,
    prefix: str | None = None,
    model: str | None = None,
    chunking: str = "paragraph",
    progress: bool = True,
    out: TextIO | None = None,
    embedder=None,
    heads: str | None = None,
    corpus_sample: int = DEFAULT_CORPUS_SAMPLE,
    full_corpus: bool = False,
) -> Evaluation:
    """Evaluate ``strategies`` on the dataset at ``dataset`` against ``target`` and report.

    ``heads``: the stored heads of the multihead strategies (default: ``default``).

    With ``limit`` the indexed corpus is bounded too (:meth:`Dataset.bounded`: the judged
    documents of those queries plus ``corpus_sample`` others), unless ``full_corpus`` or the
    whole corpus is already indexed under the prefix (then it is reused).
    """
    from indexer.embedder import DEFAULT_MODEL, Embedder, default_cache_dir
    from scholar_es.client import connect, default_target
    from scholar_es.evaluation.runner import index_exists, index_prefix

    check_output_path(json_out, "--json")
    check_output_path(plot_out, "--plot", plot=True)
    out = out or sys.stdout
    ds = load_dataset(dataset, fmt, split)
    es = connect(target or default_target())
    if limit is not None and not full_corpus:
        whole = prefix if prefix is not None else index_prefix(ds, chunking)
        if not index_exists(es, whole):
            ds = ds.limited(limit).bounded(corpus_sample, default_cache_dir() / "eval-subsets")
            if prefix is not None:
                prefix = f"{prefix}{ds.prefix_tag}"
    embedder = embedder or Embedder(model or DEFAULT_MODEL)
    result = run_evaluation(
        ds,
        parse_strategies(strategies),
        es,
        embedder,
        scope=scope,
        limit=limit,
        profile=profile,
        prefix=prefix,
        chunking=chunking,
        progress=progress,
        heads=heads,
    )
    index = result.index
    how = f"built in {index.seconds:.1f} s" if index.built else "reused"
    print(f"## {ds.name} {ds.split}, scope {scope}, profile {result.profile}\n", file=out)
    for line in result.dataset.summary_lines():
        print(line if line.startswith("  ") else f"- {line}", file=out)
    print(
        f"- index {index.prefix}chunks: {index.chunks} chunks, {index.papers} papers ({how}); "
        f"evaluation took {result.seconds:.1f} s\n",
        file=out,
    )
    print(markdown_table(result.metrics), file=out)
    if json_out:
        write_json(result.metrics, json_out)
    if plot_out:
        plot(
            result.metrics,
            plot_out,
            title=f"{ds.name} {ds.split} (scope {scope}, {len(result.dataset.queries)} queries)",
        )
    return result


def run_tune(
    dataset: str | Path,
    *,
    fmt: str = "auto",
    split: str = "train",
    target: str | None = None,
    scope: str = "corpus",
    limit: int | None = None,
    papers: int | None = None,
    folds: int = 5,
    profile: str | Path | None = None,
    out_profile: str | Path | None = None,
    name: str | None = None,
    model: str | None = None,
    allow_any_split: bool = False,
    progress: bool = True,
    out: TextIO | None = None,
    embedder=None,
):
    """Tune the hybrid profile on a train split, print the report, write the profile JSON.

    ``papers``: QASPER only, tune on the first N papers of the split and their questions
    (indexed apart, under ``<name>-<split>-first<N>-``), for train splits too large to embed.
    """
    from indexer.embedder import DEFAULT_MODEL, Embedder, default_cache_dir
    from scholar_es.client import connect, default_target
    from scholar_es.errors import ConfigError
    from scholar_es.evaluation.tune import report_lines, tune

    check_output_path(out_profile, "--out")
    if split not in TRAIN_SPLITS and not allow_any_split:
        raise ConfigError(
            f"tune fits parameters to the judgments of --split {split!r}; numbers reported on that "
            "split would then be flattering. Tune on --split train and evaluate the profile on "
            "another split (or pass --allow-any-split if this split is your training data)"
        )
    out = out or sys.stdout
    ds = full = load_dataset(dataset, fmt, split, check_corpus=papers is None)
    if papers is not None:  # the part of the papers file is written beside the embedding cache
        ds = full.first_papers(papers, default_cache_dir() / "eval-subsets")
    es = connect(target or default_target())
    embedder = embedder or Embedder(model or DEFAULT_MODEL)
    # section lifts come from the papers and qrels of the WHOLE split (no embedding needed)
    lift_source = full if full.format == "qasper" else None
    result = tune(
        ds,
        es,
        embedder,
        scope=scope,
        profile=profile,
        limit=limit,
        folds=folds,
        name=name,
        lift_source=lift_source,
        progress=progress,
    )
    print(
        f"## tune on {ds.name} {ds.split} (scope {scope}, {len(ds.limited(limit).queries)} queries)\n",
        file=out,
    )
    for line in report_lines(result):
        print(line, file=out)
    if out_profile:
        try:
            result.profile.save(out_profile)
        except OSError as e:
            raise ConfigError(f"cannot write the profile to {str(out_profile)!r}: {e}") from None
        print(f"\nwrote {out_profile}", file=out)
    return result
