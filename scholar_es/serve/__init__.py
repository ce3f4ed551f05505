"""``scholar-es serve``: one long-lived process for the Elasticsearch REST API, a search API and a page."""

from scholar_es.serve.app import create_app

__all__ = ["create_app"]
