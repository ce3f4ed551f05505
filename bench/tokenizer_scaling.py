"""StandardTokenizer on long single words: time per character against ordinary text (issue 12).

Lucene's StandardTokenizer is linear: a long word is cut into ``max_token_length`` (255) pieces.
Before the fix the embedded engine's slow path searched to the end of the text for every piece
(quadratic: a 2 MB word took tens of seconds).  This prints, for each word shape and size, the time
per character divided by the time per character of ordinary text of the same size tokenized in
the same run; a linear tokenizer keeps the ratio flat as the size grows.

    PYTHONPATH=. .venv/bin/python bench/tokenizer_scaling.py            # 200 KB and 2 MB
    PYTHONPATH=. .venv/bin/python bench/tokenizer_scaling.py --quick    # 20 KB and 200 KB
"""

from __future__ import annotations

import argparse
import time

from scholar_es.engine.analysis.tokenizer import standard_tokenize

SHAPES = {
    "letters": lambda n: "a" * n,
    "letters+digits": lambda n: "ab1" * (n // 3),
    "emoji+word": lambda n: "\U0001f600" + "a_" * (n // 2),
    "emoji+underscores": lambda n: "\U0001f600" + "_" * n,
}


def _seconds(text: str) -> float:
    start = time.perf_counter()
    standard_tokenize(text)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = (20_000, 200_000) if args.quick else (200_000, 2_000_000)
    standard_tokenize("\U0001f600" + "a" * 300)  # compile the slow-path patterns outside the timings
    print(f"{'shape':<20} {'chars':>10} {'seconds':>8} {'ratio to ordinary text':>24}")
    for size in sizes:
        baseline = _seconds(("apple pie " * (size // 10 + 1))[:size])
        for name, make in SHAPES.items():
            text = make(size)
            t = _seconds(text)
            print(f"{name:<20} {len(text):>10} {t:>8.3f} {t / max(baseline, 1e-9):>24.2f}")


if __name__ == "__main__":
    main()
