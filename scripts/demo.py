"""The searches ``make demo`` runs on the indexed demo papers.

Each question is ranked inside the engine by the hybrid, section-aware query; the output
shows paper, section type, score and a snippet per hit, then the Kibana console text of
the last query.
"""

from __future__ import annotations

import argparse
import re

from indexer.embedder import Embedder
from querybuilder.strategies import search
from scholar_es.client import connect

QUESTIONS = [
    ("How do models handle documents longer than their context length?", "sections"),
    ("Which benchmarks were used to evaluate hybrid retrieval?", "sections"),
    ("overview of retrieval-augmented generation for scientific QA", "hybrid"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--es", default="./.scholar-es-demo", help="engine directory or cluster URL")
    args = ap.parse_args()
    es = connect(args.es)
    embedder = Embedder()
    for question, strategy in QUESTIONS:
        result = search(es, question, strategy=strategy, embedder=embedder, size=5)
        print(
            f"\n=== {question}\n    strategy={strategy} intent={result.intent_rule} "
            f"search_type={result.search_type} ({result.took_ms} ms)"
        )
        for rank, hit in enumerate(result.hits, start=1):
            print(f"{rank:2}. {hit.score:7.4f}  [{hit.section_type:<12}] {hit.paper_id}  {hit.title[:60]}")
            print(f"      {hit.snippet[:150]}")
    from querybuilder.render import to_console

    text = to_console(result.request, index=result.index)
    # the 384-number query vector would fill the screen: show its first numbers only
    text = re.sub(
        r'("query_vector": \[)([^\]]*)\]', lambda m: m[1] + ", ".join(m[2].split(", ")[:3]) + ", ...]", text
    )
    print(
        "\n=== Kibana dev console text of the last query (`scholar-es query --format console` prints it whole):\n"
    )
    print(text)


if __name__ == "__main__":
    main()
