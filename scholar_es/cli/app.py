"""The ``scholar-es`` command group: every command family's commands under one ``main``.

One module a family, their shared option groups in :mod:`scholar_es.cli.options`:

* :mod:`scholar_es.cli.index` -- ``index``, ``indices``, ``delete``;
* :mod:`scholar_es.cli.search` -- ``query``, ``search`` (and its batch mode);
* :mod:`scholar_es.cli.evaluate` -- ``eval``, ``tune``;
* :mod:`scholar_es.cli.heads` -- ``heads train|list|delete``;
* :mod:`scholar_es.cli.serve` -- ``serve``, ``console``.
"""

from __future__ import annotations

import click

from scholar_es.cli.evaluate import eval_cmd, tune_cmd
from scholar_es.cli.heads import heads_group
from scholar_es.cli.index import delete_cmd, index_cmd, indices_cmd
from scholar_es.cli.search import query_cmd, search_cmd
from scholar_es.cli.serve import console_cmd, serve_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scholar-es", prog_name="scholar-es")
def main() -> None:
    """Scientific-literature search inside Elasticsearch (or the embedded engine)."""


for _command in (
    index_cmd,
    indices_cmd,
    delete_cmd,
    console_cmd,
    query_cmd,
    search_cmd,
    serve_cmd,
    eval_cmd,
    tune_cmd,
    heads_group,
):
    main.add_command(_command)
