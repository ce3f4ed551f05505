"""The ``scholar-es`` command line: one module a command family (see :mod:`scholar_es.cli.app`)."""

from scholar_es.cli.app import main

__all__ = ["main"]
