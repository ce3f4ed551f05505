"""``scholar-es heads train|list|delete``: multi-head query projection heads stored in the engine."""

from __future__ import annotations

import click

from scholar_es.cli.options import dataset_options, run_body, target_option
from scholar_es.client import default_target


@click.group("heads")
def heads_group() -> None:
    """Multi-head query projection: train, list and delete heads stored in the engine."""


@heads_group.command("train")
@dataset_options(format_help="beir or qasper.", split_help="The judged split whose pairs train the heads.")
@target_option
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

    click.echo(run_body(body).line())


@heads_group.command("list")
@target_option
@click.option("--prefix", default="", help="Alias prefix.")
def heads_list_cmd(target, prefix) -> None:
    """List the heads stored in the target."""
    from scholar_es.client import connect
    from scholar_es.projection.store import list_heads

    for name in run_body(lambda: list_heads(connect(target or default_target(), must_exist=True), prefix)):
        click.echo(name)


@heads_group.command("delete")
@click.argument("name")
@target_option
@click.option("--prefix", default="", help="Alias prefix.")
def heads_delete_cmd(name, target, prefix) -> None:
    """Delete the heads NAME (every stored version)."""
    from scholar_es.client import connect
    from scholar_es.projection.store import delete_heads

    deleted = run_body(
        lambda: delete_heads(connect(target or default_target(), must_exist=True), name, prefix)
    )
    click.echo(f"deleted {', '.join(deleted) if deleted else 'nothing'}")
