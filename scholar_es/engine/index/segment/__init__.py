"""A segment of the embedded engine, split along Lucene's codec lines.

* :mod:`.document` -- ``ParsedDoc``, ``parse_document``: ``_source`` analyzed into per-field values
* :mod:`.buffers`  -- growable arrays shared between snapshots, split columns over a mapped base
* :mod:`.postings` -- doc -> terms (CSR) and term -> docs (CSC), narrowed when saved
* :mod:`.saved`    -- numbering, checking and JSON lists of saved arrays
* :mod:`.columns`  -- one class per kind of field, each saving and loading itself
* :mod:`.segment`  -- ``Segment``: all columns of one index in seq order, snapshots, save and load
"""

from scholar_es.engine.index.segment.document import ParsedDoc, parse_document
from scholar_es.engine.index.segment.segment import Segment

__all__ = ["ParsedDoc", "Segment", "parse_document"]
