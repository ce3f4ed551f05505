"""Tuned profiles shipped with scholar-es (JSON files, loaded by name with ``--profile``)."""
