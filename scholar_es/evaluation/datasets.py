"""Judged datasets: the queries, their relevance judgments (qrels) and the corpus to index.

Two layouts (:data:`DATASET_FORMATS`):

* ``beir``: a directory with ``corpus.jsonl``, ``queries.jsonl`` (``{"_id", "text"}``) and
  ``qrels/<split>.tsv``. Retrieval is judged at the **paper** level: qrels name corpus ``_id``\\ s,
  which are the ``paper_id`` of the indexed chunks.
* ``qasper``: a directory with ``papers_<split>.jsonl``, ``questions_<split>.jsonl``
  (``{"question_id", "question", "paper_id", ...}``) and ``qrels_<split>.tsv`` (question id ->
  evidence paragraph id). Retrieval is judged at the **paragraph** level; each question knows
  its own paper, so it can be searched within that paper only (``--scope paper``).

Qrels files are BEIR TSV (``query-id<TAB>corpus-id<TAB>score``, the header line optional) or
TREC (``query-id 0 corpus-id score``). Judgments with score 0 are judged non-relevant, which every
metric here treats like unjudged, so they are dropped.

What is wrong with a dataset is said, never averaged away:

* a missing file, a malformed qrels or query line, a duplicate query id or an empty query text
  raises :class:`~scholar_es.errors.ConfigError` / :class:`~scholar_es.errors.InputError` with
  the file and line;
* a qrels line naming a query id that is not in the query file cannot be evaluated: each is kept
  as a located :class:`InputError` in :attr:`Dataset.unknown_query_lines` and reported (``strict``
  raises the first instead);
* a query without any relevant judgment is skipped and counted (:attr:`Dataset.unjudged`), never
  averaged as a zero;
* judgments naming a document that is not in the corpus are counted
  (:attr:`Dataset.unretrievable`): they stay in the qrels, so recall honestly cannot reach 1.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from indexer.readers.lines import iter_records
from scholar_es.errors import ConfigError, InputError, choices

DATASET_FORMATS: dict[str, str] = {
    "beir": "corpus.jsonl + queries.jsonl + qrels/<split>.tsv; judged per paper (corpus _id)",
    "qasper": "papers_<split>.jsonl + questions_<split>.jsonl + qrels_<split>.tsv; judged per evidence paragraph",
}
#: What a ranked hit is judged as: the paper it belongs to, or the paragraphs it covers.
LEVELS = {"beir": "paper", "qasper": "paragraph"}
#: Problems listed in full in a report before "... and N more".
SHOWN_PROBLEMS = 5


@dataclass(frozen=True)
class EvalQuery:
    id: str
    text: str
    #: QASPER: the paper the question is about (``--scope paper`` searches only it)
    paper_id: str | None = None


@dataclass
class Dataset:
    name: str
    format: str
    split: str
    #: "paper" (BEIR) or "paragraph" (QASPER)
    level: str
    #: what the indexer reads: the BEIR directory or the QASPER papers file
    corpus: Path
    #: the judged queries, in file order
    queries: list[EvalQuery]
    #: query id -> {document id: relevance > 0}; documents are paper ids or paragraph ids
    qrels: dict[str, dict[str, int]]
    #: ids of the queries in the query file without any relevant judgment (skipped, counted)
    unjudged: list[str] = field(default_factory=list)
    #: qrels lines whose query id is not in the query file (not evaluable; reported)
    unknown_query_lines: list[InputError] = field(default_factory=list)
    #: judgments naming a document that is not in the corpus (None: not checked)
    unretrievable: int | None = None
    #: number of documents (papers or paragraphs) in the corpus (None: not checked)
    corpus_size: int | None = None
    #: queries left out by :meth:`limited`
    limited_out: int = 0
    #: added to the index prefix when the corpus is a part of the split (:meth:`first_papers`)
    prefix_tag: str = ""
    #: how the indexed corpus was bounded (:meth:`bounded`), said in the report
    corpus_note: str = ""

    @property
    def queries_in_file(self) -> int:
        return len(self.queries) + len(self.unjudged) + self.limited_out

    @property
    def default_prefix(self) -> str:
        """Index alias prefix: BEIR corpora do not depend on the split (``scifact-``); QASPER
        papers do (``qasper-validation-``)."""
        slug = re.sub(r"[^a-z0-9_]+", "-", self.name.lower()).strip("-") or "dataset"
        if self.format == "qasper":
            slug = f"{slug}-{re.sub(r'[^a-z0-9_]+', '-', self.split.lower()).strip('-')}"
        return f"{slug}-{self.prefix_tag}" if self.prefix_tag else f"{slug}-"

    def limited(self, limit: int | None) -> Dataset:
        """The first ``limit`` judged queries (all when ``limit`` is None)."""
        if limit is None:
            return self
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"--limit must be a positive integer, got {limit!r}")
        kept = self.queries[:limit]
        ids = {q.id for q in kept}
        return replace(
            self,
            queries=kept,
            qrels={q: d for q, d in self.qrels.items() if q in ids},
            limited_out=self.limited_out + len(self.queries) - len(kept),
        )

    def first_papers(self, n: int, workdir: str | Path) -> Dataset:
        """QASPER: the first ``n`` papers of the split and their questions only, for tuning on a part
        of a large train split with ``--scope paper`` (each question only ever sees its own paper,
        so the part is a fair sample). The papers are copied to ``workdir``; the index prefix gets
        ``first<n>-`` so the part never passes for the whole split."""
        if self.format != "qasper":
            raise ConfigError(f"--papers applies to qasper datasets, not {self.format}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"--papers must be a positive integer, got {n!r}")
        keep: list[dict] = []
        for item in iter_records(self.corpus, str(self.corpus)):
            if len(keep) >= n:
                break
            if not isinstance(item, InputError) and isinstance(item[1].get("paper_id"), str):
                keep.append(item[1])
        out = Path(workdir) / f"{self.corpus.stem}.first{n}.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8")
        papers = {r["paper_id"] for r in keep}
        queries = [q for q in self.queries if q.paper_id in papers]
        ids = {q.id for q in queries}
        return replace(
            self,
            corpus=out,
            queries=queries,
            qrels={q: d for q, d in self.qrels.items() if q in ids},
            unjudged=[],
            unknown_query_lines=[],
            corpus_size=None,
            unretrievable=None,
            limited_out=0,
            prefix_tag=f"first{n}-",
        )

    def judged_documents(self) -> set[str]:
        """The corpus records the queries need: the judged papers (BEIR) or the questions' own
        papers (QASPER, judged per paragraph of them)."""
        if self.format == "beir":
            return {d for docs in self.qrels.values() for d in docs}
        return {q.paper_id for q in self.queries if q.paper_id}

    def bounded(self, sample: int, workdir: str | Path) -> Dataset:
        """The corpus cut to the judged documents of these queries plus ``sample`` others, for a
        quick ``--limit`` run (indexing a whole corpus for 5 queries takes minutes to hours).

        The others are a uniform sample chosen by a hash of their id: the same every run, with
        no state. They keep the search a search (distractors); the numbers are still not those of
        the whole corpus, which the report says. The part is written to ``workdir`` and indexed
        under its own prefix (``<split>-limit<N>-sample<M>-``), so it never passes for the whole.
        """
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            raise ConfigError(f"--corpus-sample must be 0 or a positive integer, got {sample!r}")
        key = "_id" if self.format == "beir" else "paper_id"
        source = self.corpus / "corpus.jsonl" if self.format == "beir" else self.corpus
        judged = self.judged_documents()
        kept: dict[int, dict] = {}
        others: list[tuple[int, int, dict]] = []  # (-hash, line, record): a max-heap of the smallest
        total = 0
        for item in iter_records(source, str(source)):
            if isinstance(item, InputError) or not isinstance(item[1].get(key), str | int):
                continue
            line, record = item
            total += 1
            doc = str(record[key])
            if doc in judged:
                kept[line] = record
                continue
            h = int.from_bytes(hashlib.sha1(doc.encode("utf-8", "surrogatepass")).digest()[:8], "big")
            if len(others) < sample:
                heapq.heappush(others, (-h, line, record))
            elif others and -others[0][0] > h:
                heapq.heapreplace(others, (-h, line, record))
        n_judged = len(kept)
        kept.update({line: record for _, line, record in others})
        tag = f"limit{len(self.queries)}-sample{sample}-"
        if self.format == "beir":
            tag = f"{re.sub(r'[^a-z0-9_]+', '-', self.split.lower()).strip('-')}-{tag}"
        out = Path(workdir) / f"{self.name}-{self.split}-{tag.rstrip('-')}"
        out.mkdir(parents=True, exist_ok=True)
        file = out / "corpus.jsonl" if self.format == "beir" else out / source.name
        text = "".join(json.dumps(kept[line], ensure_ascii=False) + "\n" for line in sorted(kept))
        file.write_text(text, encoding="utf-8")
        what = "papers" if self.format == "qasper" else "documents"
        return replace(
            self,
            corpus=out if self.format == "beir" else file,
            corpus_size=None,
            prefix_tag=tag,
            corpus_note=(
                f"corpus bounded for --limit: the {n_judged} {what} these queries need + {len(others)} "
                f"sampled of the other {total - n_judged}; numbers differ from a whole-corpus run "
                "(--full-corpus indexes everything)"
            ),
        )

    def summary_lines(self) -> list[str]:
        """What was evaluated and what was left out, for the report."""
        lines = [
            f"{self.name} ({self.format}, split {self.split}): {len(self.queries)} judged queries evaluated, "
            f"{sum(len(d) for d in self.qrels.values())} relevant {self.level}s judged"
        ]
        if self.limited_out:
            lines.append(f"{self.limited_out} judged queries left out by --limit")
        if self.corpus_note:
            lines.append(self.corpus_note)
        if self.unjudged:
            lines.append(f"{len(self.unjudged)} queries skipped: no relevant judgment (not counted as zero)")
        if self.unknown_query_lines:
            n = len(self.unknown_query_lines)
            lines.append(f"{n} qrels lines name a query id missing from the query file (not evaluable):")
            lines.extend(f"  {e}" for e in self.unknown_query_lines[:SHOWN_PROBLEMS])
            if n > SHOWN_PROBLEMS:
                lines.append(f"  ... and {n - SHOWN_PROBLEMS} more")
        if self.unretrievable:
            lines.append(
                f"{self.unretrievable} judgments name a {self.level} missing from the corpus "
                "(kept: they cap recall below 1)"
            )
        return lines


# --- loading ---------------------------------------------------------------------------------
def detect_format(path: Path) -> str:
    if (path / "corpus.jsonl").is_file():
        return "beir"
    if any(path.glob("questions_*.jsonl")):
        return "qasper"
    raise ConfigError(
        f"cannot tell the format of dataset {str(path)!r}: it holds neither corpus.jsonl (beir) "
        "nor questions_<split>.jsonl (qasper); pass --format"
    )


def available_splits(path: Path, fmt: str) -> list[str]:
    if fmt == "beir":
        return sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
    return sorted(p.name[len("qrels_") : -len(".tsv")] for p in path.glob("qrels_*.tsv"))


def load_dataset(
    path: str | Path,
    fmt: str = "auto",
    split: str | None = None,
    *,
    strict: bool = False,
    check_corpus: bool = True,
) -> Dataset:
    """Load the judged dataset at ``path`` (see the module doc).

    ``split`` None takes the only split there is (else ConfigError listing them). ``strict``
    raises on the first qrels line naming an unknown query. ``check_corpus`` reads the corpus's
    document ids to count judgments no search can find (a few seconds for QASPER train).
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ConfigError(
            f"dataset {str(path)!r} is not a directory; pass the folder that holds the "
            "corpus, queries and qrels"
        )
    if fmt == "auto":
        fmt = detect_format(root)
    if fmt not in DATASET_FORMATS:
        raise ConfigError(f"unknown dataset format {fmt!r}; use 'auto' or one of {choices(DATASET_FORMATS)}")
    splits = available_splits(root, fmt)
    if split is None:
        if len(splits) != 1:
            raise ConfigError(
                f"dataset {str(root)!r} has splits {choices(splits) or 'none'}; pick one with --split"
            )
        split = splits[0]
    if fmt == "beir":
        corpus, qfile, qrels_file = root, root / "queries.jsonl", root / "qrels" / f"{split}.tsv"
        _require(root / "corpus.jsonl", "the BEIR corpus", splits)
    else:
        corpus = root / f"papers_{split}.jsonl"
        qfile, qrels_file = root / f"questions_{split}.jsonl", root / f"qrels_{split}.tsv"
        _require(corpus, f"the QASPER papers of split {split!r}", splits)
    _require(qfile, "the queries", splits)
    _require(qrels_file, f"the qrels of split {split!r}", splits)

    queries = list(_read_queries(qfile, fmt))
    known = {q.id for q in queries}
    qrels, unknown = read_qrels(qrels_file, known)
    if strict and unknown:
        raise unknown[0]
    judged = [q for q in queries if qrels.get(q.id)]
    unjudged = [q.id for q in queries if not qrels.get(q.id)]
    ds = Dataset(
        name=root.name,
        format=fmt,
        split=split,
        level=LEVELS[fmt],
        corpus=corpus,
        queries=judged,
        qrels={q.id: qrels[q.id] for q in judged},
        unjudged=unjudged,
        unknown_query_lines=unknown,
    )
    if check_corpus:
        ids = corpus_ids(ds)
        ds.corpus_size = len(ids)
        ds.unretrievable = sum(1 for docs in ds.qrels.values() for d in docs if d not in ids)
    return ds


def _require(file: Path, what: str, splits: list[str]) -> None:
    if not file.is_file():
        hint = f"; splits found: {choices(splits)}" if splits else ""
        raise ConfigError(f"{what} file {str(file)!r} does not exist{hint}")


def _read_queries(file: Path, fmt: str) -> Iterator[EvalQuery]:
    id_key, text_key = ("_id", "text") if fmt == "beir" else ("question_id", "question")
    seen: dict[str, int] = {}
    for item in iter_records(file, str(file)):
        if isinstance(item, InputError):
            raise item
        line, rec = item
        qid, text = rec.get(id_key), rec.get(text_key)
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or not str(qid).strip():
            raise InputError(
                f"missing or invalid query id {qid!r}; every query needs a non-empty {id_key!r}",
                source=str(file),
                line=line,
                field=id_key,
            )
        qid = str(qid)
        if not isinstance(text, str) or not text.strip():
            raise InputError(
                f"query {qid!r} has no text; give it a non-empty {text_key!r}",
                source=str(file),
                line=line,
                field=text_key,
            )
        if qid in seen:
            raise InputError(
                f"duplicate query id {qid!r}, first seen at line {seen[qid]}; query ids must be unique",
                source=str(file),
                line=line,
                field=id_key,
            )
        seen[qid] = line
        paper = None
        if fmt == "qasper":
            paper = rec.get("paper_id")
            if not isinstance(paper, str) or not paper:
                raise InputError(
                    f"question {qid!r} has no 'paper_id'", source=str(file), line=line, field="paper_id"
                )
        yield EvalQuery(id=qid, text=text, paper_id=paper)


def read_qrels(
    file: Path, known_queries: set[str] | None = None
) -> tuple[dict[str, dict[str, int]], list[InputError]]:
    """(query id -> {doc id: relevance > 0}, located errors for lines naming unknown queries).

    A malformed line raises InputError with the file and line. With ``known_queries`` None every
    query id is accepted.
    """
    qrels: dict[str, dict[str, int]] = {}
    unknown: list[InputError] = []
    source = str(file)
    first = True
    with file.open(encoding="utf-8") as handle:
        for line_no, raw in enumerate(handle, start=1):
            text = raw.strip()
            if not text:
                continue
            is_first, first = first, False
            cols = text.split("\t") if "\t" in text else text.split()
            if len(cols) == 4:  # TREC: qid iteration docid rel
                cols = [cols[0], cols[2], cols[3]]
            if len(cols) != 3:
                raise InputError(
                    f"expected 3 tab-separated columns (query-id, corpus-id, score) or 4 TREC "
                    f"columns, got {len(cols)}: {text[:60]!r}",
                    source=source,
                    line=line_no,
                )
            qid, doc, score = (c.strip() for c in cols)
            try:
                rel = int(float(score))
            except ValueError:
                if is_first and _is_header(qid, doc, score):
                    continue  # the header line: query-id corpus-id score
                raise InputError(
                    f"relevance score {score!r} is not a number", source=source, line=line_no
                ) from None
            if known_queries is not None and qid not in known_queries:
                unknown.append(
                    InputError(f"query id {qid!r} is not in the query file", source=source, line=line_no)
                )
                continue
            if rel > 0:
                docs = qrels.setdefault(qid, {})
                docs[doc] = max(rel, docs.get(doc, 0))
            else:
                qrels.setdefault(qid, {})
    return qrels, unknown


def _is_header(*cols: str) -> bool:
    return any(
        c.lower().replace("_", "-") in ("query-id", "corpus-id", "score", "qid", "docid") for c in cols
    )


def corpus_ids(ds: Dataset) -> set[str]:
    """The ids a judgment can name: paper ids (BEIR) or non-empty paragraph ids (QASPER)."""
    if ds.format == "beir":
        file = ds.corpus / "corpus.jsonl"
        return {
            str(rec["_id"])
            for item in iter_records(file, str(file))
            if not isinstance(item, InputError) and "_id" in (rec := item[1])
        }
    from indexer.chunker import chunk_paper
    from indexer.readers import read_papers

    ids: set[str] = set()
    for paper in read_papers(ds.corpus, "qasper"):
        if not isinstance(paper, InputError):
            ids.update(p for c in chunk_paper(paper, "paragraph") for p in c.paragraph_ids)
    return ids
