"""Evaluation results as a markdown table, JSON and a PNG chart.

All three take ``{strategy: {metric: value}}`` (what :func:`evaluation.runner.evaluate` returns);
the JSON is exactly that dict, metric names as in :data:`evaluation.metrics.ALL_METRICS`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from scholar_es.errors import ConfigError
from scholar_es.evaluation.metrics import ALL_METRICS, LATENCY_METRICS, METRICS

Results = Mapping[str, Mapping[str, float]]
HEADERS = {
    "ndcg@10": "nDCG@10",
    "mrr@10": "MRR@10",
    "p@1": "P@1",
    "p@3": "P@3",
    "p@10": "P@10",
    "recall@10": "R@10",
    "recall@100": "R@100",
    "latency_p50_ms": "p50 ms",
    "latency_p95_ms": "p95 ms",
}


def _fmt(metric: str, value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.1f}" if metric in LATENCY_METRICS else f"{value:.3f}"


def markdown_table(results: Results, metrics: Sequence[str] = ALL_METRICS, bold_best: bool = True) -> str:
    """Strategies as rows, metrics as columns; the best value of each quality metric in bold."""
    rows = list(results)
    best: dict[str, float] = {}
    if bold_best and len(rows) > 1:
        for m in metrics:
            vals = [results[r][m] for r in rows if m in results[r]]
            if vals and m not in LATENCY_METRICS and round(max(vals), 3) != round(min(vals), 3):
                best[m] = max(vals)
    lines = [
        "| strategy | " + " | ".join(HEADERS.get(m, m) for m in metrics) + " |",
        "|---|" + "---:|" * len(metrics),
    ]
    for r in rows:
        cells = []
        for m in metrics:
            v = results[r].get(m)
            text = _fmt(m, v)
            cells.append(
                f"**{text}**" if m in best and v is not None and round(v, 3) == round(best[m], 3) else text
            )
        lines.append(f"| {r} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def to_json(results: Results) -> str:
    return (
        json.dumps({s: {m: float(v) for m, v in vals.items()} for s, vals in results.items()}, indent=2)
        + "\n"
    )


def write_json(results: Results, path: str | Path) -> None:
    try:
        Path(path).write_text(to_json(results), encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot write --json {str(path)!r}: {e}") from None


def plot(results: Results, path: str | Path, title: str = "") -> None:
    """Grouped bars: quality metrics (left, 0-1) and latency p50/p95 (right, ms), one bar per strategy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    strategies = list(results)
    if not strategies:
        raise ConfigError("nothing to plot: no strategy was evaluated")
    n = len(strategies)
    colors = matplotlib.color_sequences["tab10"]  # the colours of the tab10 colormap, typed
    fig, (ax, lat) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [4, 1.3]})
    width = 0.8 / n
    for i, s in enumerate(strategies):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(METRICS))]
        vals = [results[s].get(m, 0.0) for m in METRICS]
        bars = ax.bar(xs, vals, width, label=s, color=colors[i % len(colors)])
        if n <= 4:
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1, rotation=90)
    ax.set_xticks(range(len(METRICS)), [HEADERS[m] for m in METRICS])
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("score (mean over queries)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", ncol=min(n, 4), fontsize=9, frameon=False)
    ax.set_title("retrieval quality")
    for i, s in enumerate(strategies):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(LATENCY_METRICS))]
        vals = [results[s].get(m, 0.0) for m in LATENCY_METRICS]
        bars = lat.bar(xs, vals, width, color=colors[i % len(colors)])
        lat.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    lat.set_xticks(range(len(LATENCY_METRICS)), ["p50", "p95"])
    lat.set_ylabel("latency per query (ms)")
    lat.grid(axis="y", alpha=0.3)
    lat.set_title("latency")
    lat.margins(y=0.12)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as e:
        raise ConfigError(f"cannot write --plot {str(path)!r}: {e}") from None
    finally:
        plt.close(fig)
