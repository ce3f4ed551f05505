"""``scholar-es heads train|list|delete``: multi-head query projection heads stored in the engine,
and (``heads train --self-supervised``) the index's self-supervised query adapter."""

from __future__ import annotations

import click

from scholar_es.cli.options import dataset_options, fail, run_body, target_option
from scholar_es.client import default_target
from scholar_es.projection import adapter as ad
from scholar_es.projection.selfsup import DEFAULT_KINDS, DEFAULT_MAX_PAIRS


@click.group("heads")
def heads_group() -> None:
    """Multi-head query projection: train, list and delete heads stored in the engine."""


#: options of the judged training only, and of the self-supervised training only (refused by name
#: with the other)
JUDGED_ONLY = {
    "dataset": "DATASET",
    "fmt": "--format",
    "split": "--split",
    "name": "--name",
    "tau": "--tau",
    "threshold": "--threshold",
    "alpha": "--alpha",
    "tune": "--tune",
}
SELF_ONLY = {
    "pairs": "--pairs",
    "max_pairs": "--max-pairs",
    "seed": "--seed",
    "remove_query": "--remove-query",
    "sentences_per_chunk": "--sentences-per-chunk",
    "rank": "--rank",
    "scale": "--scale",
    "epochs": "--epochs",
    "lr": "--lr",
    "batch_size": "--batch-size",
    "hard_batches": "--hard-batches",
}


def _given(names: dict[str, str]) -> list[str]:
    """The flags among ``names`` given on the command line (not left at their defaults)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return [
        flag
        for key, flag in names.items()
        if ctx.get_parameter_source(key) not in (None, ParameterSource.DEFAULT)
    ]


@heads_group.command("train")
@dataset_options(
    format_help="beir or qasper.", split_help="The judged split whose pairs train the heads.", required=False
)
@target_option
@click.option("--name", default="default", show_default=True, help="Name of the heads.")
@click.option(
    "--prefix",
    default=None,
    help="Alias prefix of the indexed corpus [default: <dataset>-<split>-; required with --self-supervised].",
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
@click.option(
    "--self-supervised",
    "self_supervised",
    is_flag=True,
    help="Train the index's query adapter from its own text (no DATASET, no judgments): pairs "
    "title -> abstract, sentence -> its paragraph, section heading -> its paragraphs; stored as "
    "<prefix>adapter, used by --strategy adapted-dense / adapted-hybrid.",
)
@click.option(
    "--pairs",
    default=",".join(DEFAULT_KINDS),
    show_default=True,
    help="With --self-supervised: the kinds of pairs, any of title, sentence, heading.",
)
@click.option(
    "--max-pairs",
    type=int,
    default=DEFAULT_MAX_PAIRS,
    show_default=True,
    help="With --self-supervised: at most this many pairs.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="With --self-supervised: the sampling seed."
)
@click.option(
    "--remove-query",
    is_flag=True,
    help="With --self-supervised: cut the query (sentence, title, heading) out of its target's text "
    "and embed that (one encode per pair) instead of using the chunk's indexed vector.",
)
@click.option(
    "--sentences-per-chunk",
    type=int,
    default=1,
    show_default=True,
    help="With --self-supervised: sentence pairs drawn from each chunk.",
)
@click.option(
    "--rank",
    type=int,
    default=None,
    help="With --self-supervised: the rank of the adapter's map [default: full, d x d].",
)
@click.option(
    "--scale",
    type=float,
    default=ad.DEFAULT_SCALE,
    show_default=True,
    help="With --self-supervised: the cosine scale of the in-batch softmax.",
)
@click.option(
    "--epochs",
    type=int,
    default=ad.DEFAULT_EPOCHS,
    show_default=True,
    help="With --self-supervised: at most this many epochs (early stopping on held-out pairs).",
)
@click.option(
    "--lr",
    type=float,
    default=ad.DEFAULT_LR,
    show_default=True,
    help="With --self-supervised: the learning rate.",
)
@click.option(
    "--batch-size",
    type=int,
    default=ad.DEFAULT_BATCH,
    show_default=True,
    help="With --self-supervised: pairs per batch (in-batch negatives).",
)
@click.option(
    "--hard-batches",
    is_flag=True,
    help="With --self-supervised: batches of pairs whose targets are alike (k-means), so the "
    "in-batch negatives are hard ones.",
)
def heads_train_cmd(
    dataset, fmt, split, target, name, prefix, tau, threshold, alpha, tune, self_supervised, **selfsup
) -> None:
    """Train heads from the (question, answer) pairs of a judged DATASET and store them in the
    engine; or, with --self-supervised, the index's query adapter from the indexed text alone."""
    from scholar_es.client import connect

    if self_supervised:
        refused = _given(JUDGED_ONLY)
        if refused:
            fail(
                f"--self-supervised trains from the indexed corpus alone and takes no {', '.join(refused)}; "
                "leave them out and name the corpus with --prefix"
            )
        if prefix is None:
            fail("--self-supervised needs --prefix: the alias prefix of the indexed corpus (e.g. scifact-)")
        return _train_self_supervised(target, prefix, **selfsup)
    refused = _given(SELF_ONLY)
    if refused:
        fail(f"{', '.join(refused)} apply only with --self-supervised; add it or leave them out")
    if dataset is None:
        fail("give the judged DATASET whose pairs train the heads, or --self-supervised to train the adapter")
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

    click.echo(run_body(body).line())


def _train_self_supervised(target, prefix, *, pairs, **options) -> None:
    from scholar_es.client import connect
    from scholar_es.projection.selfsup_train import train_self_supervised

    def body():
        es = connect(target or default_target(), must_exist=True)
        return train_self_supervised(es, prefix, kinds=pairs.split(","), **options)[1]

    click.echo(run_body(body).line())


@heads_group.command("list")
@target_option
@click.option("--prefix", default="", help="Alias prefix.")
def heads_list_cmd(target, prefix) -> None:
    """List the heads stored in the target, one name a line; then, on a line of its own,
    ``self-supervised adapter <alias>`` when the prefix has one (``heads train --self-supervised``)."""
    from scholar_es.client import connect
    from scholar_es.projection.adapter_store import adapter_alias
    from scholar_es.projection.store import list_heads

    def body() -> tuple[list[str], bool]:
        es = connect(target or default_target(), must_exist=True)
        return list_heads(es, prefix), bool(es.indices.exists_alias(name=adapter_alias(prefix)))

    names, adapter = run_body(body)
    for name in names:
        click.echo(name)
    if adapter:
        click.echo(f"self-supervised adapter {adapter_alias(prefix)}")


@heads_group.command("delete")
@click.argument("name", required=False)
@target_option
@click.option("--prefix", default="", help="Alias prefix.")
@click.option(
    "--self-supervised",
    "self_supervised",
    is_flag=True,
    help="Delete the prefix's self-supervised adapter (every stored version) instead of heads NAME.",
)
def heads_delete_cmd(name, target, prefix, self_supervised) -> None:
    """Delete the heads NAME (every stored version), or with --self-supervised the prefix's adapter."""
    from scholar_es.client import connect
    from scholar_es.projection.adapter_store import delete_adapter
    from scholar_es.projection.store import delete_heads

    if self_supervised == (name is not None):
        raise click.UsageError(
            f"heads delete takes either a heads NAME or --self-supervised, not {'both' if name else 'neither'}; "
            "e.g. `scholar-es heads delete default` or `scholar-es heads delete --self-supervised --prefix P`"
        )

    def body() -> list[str]:
        es = connect(target or default_target(), must_exist=True)
        return delete_adapter(es, prefix) if self_supervised else delete_heads(es, name, prefix)

    deleted = run_body(body)
    click.echo(f"deleted {', '.join(deleted) if deleted else 'nothing'}")
