"""``scholar-es eval`` and ``tune``: evaluate strategies and tune profiles on judged datasets."""

from __future__ import annotations

from typing import Any

import click

from querybuilder.registry import names as strategy_names
from scholar_es.cli.options import (
    PROFILE_HELP,
    backend_option,
    dataset_options,
    run_body,
    target_option,
    use_backend,
)

AUTO_FORMAT_HELP = "beir or qasper (auto detects)."


@click.command("eval")
@dataset_options(
    format_help=AUTO_FORMAT_HELP,
    split=None,
    split_help="The qrels split to evaluate; needed when the dataset has several (they are listed).",
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
@target_option
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
@backend_option
def eval_cmd(dataset: str, quiet: bool, backend: str | None, **given: Any) -> None:
    """Evaluate strategies on a judged DATASET: nDCG@10, MRR@10, P@1/3/10, Recall@10/100, latency.

    The dataset is indexed into the target the first time and reused afterwards; queries with
    no judgments are skipped and counted, never averaged in as zero.
    """
    use_backend(backend)
    from scholar_es.evaluation.command import run_eval

    run_body(lambda: run_eval(dataset, progress=not quiet, **given))  # given: run_eval's keywords


@click.command("tune")
@dataset_options(format_help=AUTO_FORMAT_HELP, split_help="The split to tune on (train only, by design).")
@target_option
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
def tune_cmd(dataset: str, quiet: bool, **given: Any) -> None:
    """Tune profile parameters (hybrid weights, BM25 saturation, section multipliers) on a train split.

    Prints cross-validated gains and writes a profile that search, query and eval accept
    with --profile. Report the tuned profile on a split it did not see.
    """
    from scholar_es.evaluation.command import run_tune

    run_body(lambda: run_tune(dataset, progress=not quiet, **given))  # given: run_tune's keywords
