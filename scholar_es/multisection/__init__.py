"""Multi-section search: one broad question, several focused searches, one ranked list of papers.

See docs/multisection.md; the API is :func:`multisection.flow.multisection_search`.
"""
