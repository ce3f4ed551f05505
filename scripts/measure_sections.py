"""Measure how the section-heading rules (indexer/sections.json) cover real headings.

For QASPER (train + validation body sections) and PubMedQA (structured-abstract labels) it
prints the share of paragraphs and of distinct headings mapped to each section type by the
heading alone (``normalize_heading``), the share of paragraphs per type as the readers assign it
(``section_types``: unknown headings between two known sections of one type take that type),
and the most frequent headings left at "other". ``--per-type N`` also lists the top N headings of every
type, to eyeball wrong mappings; ``--paths N`` lists ``Parent ::: Child`` headings where the
chosen type differs from "the deepest part with a type decides".

    .venv/bin/python scripts/measure_sections.py [--data DIR] [--rules FILE] [--other 40] [--per-type 50]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# Run as a plain script from anywhere: make the repository's packages importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexer.models import SECTION_TYPES  # noqa: E402
from indexer.readers import read_papers  # noqa: E402
from indexer.sections import HeadingRules, heading_parts, load_rules, match_heading, section_types  # noqa: E402
from scholar_es.errors import InputError  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@dataclass
class Counts:
    """Non-empty paragraphs per heading, and per type as the reader assigns it (neighbours used)."""

    by_heading: Counter[str] = field(default_factory=Counter)
    in_context: Counter[str] = field(default_factory=Counter)


def count(files: list[Path], fmt: str, rules: HeadingRules) -> Counts:
    counts = Counts()
    for file in files:
        for item in read_papers(file, fmt):
            if isinstance(item, InputError):
                print(f"warning: {item}", file=sys.stderr)
                continue
            headings = [s.heading for s in item.sections]
            for section, section_type in zip(
                item.sections, section_types(headings, rules=rules), strict=True
            ):
                n = sum(1 for p in section.paragraphs if p.text.strip())
                counts.by_heading[section.heading] += n
                counts.in_context[section_type] += n
    return counts


def report(name: str, counts: Counts, rules: HeadingRules, other_top: int, per_type: int, paths: int) -> None:
    headings = counts.by_heading
    matched = {h: match_heading(h, rules) for h in headings}
    typed = {h: t or "other" for h, t in matched.items()}
    by_para: Counter[str] = Counter()
    by_heading: Counter[str] = Counter()
    for heading, n in headings.items():
        by_para[typed[heading]] += n
        by_heading[typed[heading]] += 1
    total_para, total_head = sum(by_para.values()), len(headings)
    print(f"\n== {name}: {total_para} paragraphs, {total_head} distinct headings")
    print(f"{'':<14}{'heading only':>30}{'with neighbours':>20}")
    print(f"{'type':<14}{'paragraphs':>12}{'%':>7}{'headings':>10}{'%':>7}{'paragraphs':>13}{'%':>7}")
    for t in SECTION_TYPES:
        print(
            f"{t:<14}{by_para[t]:>12}{by_para[t] / total_para:>7.1%}{by_heading[t]:>10}"
            f"{by_heading[t] / total_head:>7.1%}{counts.in_context[t]:>13}"
            f"{counts.in_context[t] / total_para:>7.1%}"
        )
    unmatched = {h: n for h, n in headings.items() if matched[h] is None}
    print(
        f"'other' by heading only: {sum(unmatched.values())} paragraphs / {len(unmatched)} headings "
        "match no rule, the rest are other on purpose (acknowledgments, appendices, ...)"
    )
    _top(
        f"most frequent headings left at 'other' ({name})",
        {h: n for h, n in headings.items() if typed[h] == "other"},
        other_top,
    )
    for t in SECTION_TYPES if per_type else ():
        _top(
            f"top headings typed {t!r} ({name})",
            {h: n for h, n in headings.items() if typed[h] == t},
            per_type,
        )
    if paths:
        differ = {}
        for heading, n in headings.items():
            types = [rules.match(part) for part in heading_parts(heading)]
            deepest = next((t for t in reversed(types) if t not in (None, "other")), "other")
            if len(types) > 1 and deepest != typed[heading]:
                differ[f"{heading}  [{typed[heading]}, deepest part: {deepest}]"] = n
        print(
            f"\n-- paths where the top part overrides the deepest: {len(differ)} headings, "
            f"{sum(differ.values())} paragraphs"
        )
        _top("", differ, paths)


def _top(title: str, counts: dict[str, int], n: int) -> None:
    if title:
        print(f"\n-- {title}")
    for heading, count in Counter(counts).most_common(n):
        print(f"{count:>7}  {heading}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("SCHOLAR_ES_DATA", DEFAULT_DATA)),
        help="the shared data folder (default: $SCHOLAR_ES_DATA or ../shared/data)",
    )
    parser.add_argument("--rules", type=Path, default=None, help="a sections.json to measure instead")
    parser.add_argument("--other", type=int, default=40, help="how many 'other' headings to list")
    parser.add_argument("--per-type", type=int, default=0, help="list the top N headings of every type")
    parser.add_argument("--paths", type=int, default=0, help="list N path headings decided by the top part")
    args = parser.parse_args()
    if not args.data.is_dir():
        sys.exit(f"data folder {str(args.data)!r} not found; pass --data or set SCHOLAR_ES_DATA")
    rules = load_rules(args.rules)
    qasper = sorted((args.data / "qasper").glob("papers_*.jsonl"))
    report(
        "QASPER " + "+".join(p.stem.removeprefix("papers_") for p in qasper),
        count(qasper, "qasper", rules),
        rules,
        args.other,
        args.per_type,
        args.paths,
    )
    report(
        "PubMedQA",
        count([args.data / "pubmedqa" / "papers.jsonl"], "pubmedqa", rules),
        rules,
        args.other,
        args.per_type,
        args.paths,
    )


if __name__ == "__main__":
    main()
