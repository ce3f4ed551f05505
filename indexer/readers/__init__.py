"""Input readers: papers from JSON-lines files (ours, BEIR, QASPER, PubMedQA).

One module per format; :mod:`indexer.readers.core` holds the registry and ``read_papers``,
re-exported here. The input schema of our own format is described in :mod:`indexer.readers.jsonl`.
"""

from indexer.readers.core import FORMATS, detect_format, read_papers

__all__ = ["FORMATS", "detect_format", "read_papers"]
