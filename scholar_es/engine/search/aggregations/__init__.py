"""Aggregations (``aggs``): ``parser`` parses the body, ``tree`` runs it; ``terms``, ``buckets`` and
``metrics`` compute the aggregation types, ``values`` reads a field's doc values."""
