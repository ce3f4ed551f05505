"""Train heads from (question, answer id) pairs of a judged dataset (issue 7, Training).

* :func:`read_pairs` -- the pairs of one split, read exactly as ``scholar-es eval`` reads the
  dataset (:mod:`evaluation.datasets`): BEIR (``queries.jsonl`` + ``qrels/<split>.tsv``, answer =
  corpus id = paper id) or QASPER (``questions_<split>.jsonl`` + ``qrels_<split>.tsv``, answer =
  evidence paragraph id = chunk id). Judgments with score 0 are not pairs.
* :func:`build_heads` -- pure: "many questions -> one answer": the questions are grouped by
  answer; a head per answer holds the normalized mean of its questions' embeddings (the
  centroid) and the answer's embedding. A question with several answers joins each group.
* :func:`answer_texts` -- the answers' texts from the index, so the answer embedding is the
  vector the index holds (vectors are excluded from ``_source``, so the text is re-embedded,
  exactly as :mod:`indexer.pipeline` embedded it; the embedding cache makes this free for an
  indexed corpus).
* :func:`train_heads` -- all of the above plus :func:`projection.store.save_heads`.

Questions are embedded as ``querybuilder`` embeds them at search time (the cleaned question).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from indexer.models import Chunk, Paper
from indexer.pipeline import embedding_text
from scholar_es.errors import ConfigError
from scholar_es.projection.heads import DEFAULT_NAME, DEFAULT_THRESHOLD, Heads, check_name
from scholar_es.projection.routing import DEFAULT_TAU, NO_THRESHOLD, blend, normalize, route
from scholar_es.projection.tuning import FallbackChoice, choose_fallback

ID_BATCH = 500  # ids per terms lookup


@dataclass(frozen=True)
class Pair:
    question_id: str
    question: str
    answer_id: str


def question_text(question: str) -> str:
    """What gets embedded for a question: the cleaned question, as the query builder embeds it."""
    from querybuilder.plan import clean_question

    return clean_question(question)[0]


# --- reading -----------------------------------------------------------------------------------
def load_judged(dataset: str | Path, fmt: str = "auto", split: str | None = "train"):
    """The judged dataset as ``eval`` reads it (:func:`evaluation.datasets.load_dataset`)."""
    from scholar_es.evaluation.datasets import load_dataset

    return load_dataset(dataset, fmt, split, check_corpus=False)


def pairs_of(ds, on_warning: Callable[[str], None] | None = None) -> list[Pair]:
    """(question, answer id) pairs of a loaded dataset, in question order; qrels lines naming
    questions missing from the questions file are reported through ``on_warning``."""
    if ds.unknown_query_lines and on_warning:
        on_warning(
            f"{len(ds.unknown_query_lines)} qrels lines name questions that are not in the questions file "
            f"and were skipped; the first: {ds.unknown_query_lines[0]}"
        )
    return [Pair(q.id, q.text, doc) for q in ds.queries for doc, score in ds.qrels[q.id].items() if score > 0]


def read_pairs(
    dataset: str | Path,
    fmt: str = "auto",
    split: str | None = "train",
    on_warning: Callable[[str], None] | None = None,
) -> list[Pair]:
    """The (question, answer id) pairs of ``split`` of a BEIR (answer = corpus id = paper id) or
    QASPER (answer = evidence paragraph id = chunk id) dataset; judgments with score 0 are not
    pairs."""
    return pairs_of(load_judged(dataset, fmt, split), on_warning)


# --- pure training -----------------------------------------------------------------------------
def cluster_by_answer(pairs: Sequence[Pair]) -> dict[str, list[int]]:
    """answer id -> row numbers of its pairs ("many questions -> one answer"), first-seen order."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        groups.setdefault(p.answer_id, []).append(i)
    return groups


def build_heads(
    pairs: Sequence[Pair],
    question_vectors: np.ndarray,
    answer_vectors: dict[str, np.ndarray],
    *,
    model: str,
    name: str = DEFAULT_NAME,
    tau: float = DEFAULT_TAU,
    threshold: float = NO_THRESHOLD,
    alpha: float = 1.0,
    info: dict | None = None,
) -> Heads:
    """One head per answer that has a vector: centroid = normalize(mean of its questions' vectors
    (row i of ``question_vectors`` belongs to ``pairs[i]``)), answer = its normalized vector.
    Answers missing from ``answer_vectors`` get no head."""
    Qv = np.asarray(question_vectors, dtype=np.float32)
    if Qv.ndim != 2 or Qv.shape[0] != len(pairs):
        raise ConfigError(f"expected one question vector per pair ({len(pairs)}), got shape {Qv.shape}")
    ids, cents, answers, counts = [], [], [], []
    for answer_id, rows in cluster_by_answer(pairs).items():
        vec = answer_vectors.get(answer_id)
        if vec is None:
            continue
        ids.append(answer_id)
        cents.append(normalize(Qv[rows].mean(axis=0)))
        answers.append(normalize(np.asarray(vec, dtype=np.float32)))
        counts.append(len(rows))
    dims = int(Qv.shape[1])
    empty = np.zeros((0, dims), dtype=np.float32)
    return Heads(
        answer_ids=tuple(ids),
        centroids=np.asarray(cents, dtype=np.float32).reshape(-1, dims) if cents else empty,
        answers=np.asarray(answers, dtype=np.float32).reshape(-1, dims) if answers else empty,
        n_questions=np.asarray(counts, dtype=np.int64),
        model=model,
        dims=dims,
        tau=tau,
        threshold=threshold,
        alpha=alpha,
        name=name,
        info=dict(info or {}),
    )


# --- answers from the index --------------------------------------------------------------------
def _lookup(es, index: str, field_name: str, ids: Sequence[str]) -> dict[str, dict]:
    from elasticsearch import NotFoundError

    found: dict[str, dict] = {}
    for start in range(0, len(ids), ID_BATCH):
        part = list(ids[start : start + ID_BATCH])
        try:
            resp = es.search(index=index, query={"terms": {field_name: part}}, size=len(part)).body
        except NotFoundError:
            return found
        for hit in resp["hits"]["hits"]:
            src = hit.get("_source") or {}
            found[str(src.get(field_name, hit["_id"]))] = src
    return found


def chunk_embedding_text(src: dict) -> str:
    """The text :mod:`indexer.pipeline` embedded for a chunk document (its ``embedding_text``)."""
    chunk = Chunk(
        id=str(src.get("chunk_id") or "?"),
        paper_id=str(src.get("paper_id") or "?"),
        section_heading=src.get("section_heading") or "",
        section_type=src.get("section_type") or "other",
        text=src.get("chunk_text") or "",
        paragraph_ids=list(src.get("paragraph_ids") or []),
        position=int(src.get("position") or 0),
    )
    return embedding_text(chunk, Paper(id=chunk.paper_id, title=src.get("title") or ""))


def resolve_answers(es, answer_ids: Sequence[str], prefix: str = "") -> dict[str, tuple[str, str]]:
    """answer id -> (the text the indexer embedded for it, "chunk" or "paper"): a chunk id
    (``<prefix>chunks``) or else a paper id (``<prefix>papers``: ``title\nabstract``, or its
    first chunk's text when both are empty). Ids found in neither index are left out."""
    ids = list(dict.fromkeys(answer_ids))
    out = {
        cid: (chunk_embedding_text(src), "chunk")
        for cid, src in _lookup(es, f"{prefix}chunks", "chunk_id", ids).items()
    }
    rest = [i for i in ids if i not in out]
    if rest:
        papers = _lookup(es, f"{prefix}papers", "paper_id", rest)
        no_head = []
        for pid, src in papers.items():
            head = f"{src.get('title') or ''}\n{src.get('abstract') or ''}".strip()
            if head:
                out[pid] = (head, "paper")
            else:
                no_head.append(pid)
        if no_head:
            first = _first_chunks(es, f"{prefix}chunks", no_head)
            out.update({pid: (first.get(pid, pid), "paper") for pid in no_head})
    return out


def answer_texts(es, answer_ids: Sequence[str], prefix: str = "") -> dict[str, str]:
    """answer id -> the text the indexer embedded for it (see :func:`resolve_answers`)."""
    return {k: text for k, (text, _) in resolve_answers(es, answer_ids, prefix).items()}


def _first_chunks(es, index: str, paper_ids: Sequence[str]) -> dict[str, str]:
    resp = es.search(
        index=index,
        query={"bool": {"filter": [{"terms": {"paper_id": list(paper_ids)}}, {"term": {"position": 0}}]}},
        size=len(paper_ids),
    ).body
    return {str(h["_source"]["paper_id"]): chunk_embedding_text(h["_source"]) for h in resp["hits"]["hits"]}


# --- tuning the fallback through the engine ------------------------------------------------------
def tune_fallback(
    es,
    pairs: Sequence[Pair],
    question_vectors: np.ndarray,
    answer_vectors: dict[str, np.ndarray],
    *,
    prefix: str = "",
    level: str = "paper",
    tau: float = DEFAULT_TAU,
    folds: int = 4,
    seed: int = 0,
    alphas: Sequence[float] = (1.0, 0.75, 0.5),
    max_novel_loss: float | None = 0.0,
    depth: int = 100,
    on_progress: Callable[[int, int], None] | None = None,
) -> FallbackChoice:
    """The fallback (threshold, α) by cross-validation over the training questions (issue 7: "a
    parameter, tuned on train"): heads built on ``folds - 1`` folds route each held-out question;
    its reciprocal rank (top ``depth`` of the engine's kNN on ``<prefix>chunks``, answers compared
    as ``level`` ids) with the projected, direct and blended vectors feeds
    :func:`projection.tuning.choose_fallback` (by default: never worse than direct on the
    held-out questions whose answers the heads did not know)."""
    from scholar_es.projection.search import knn_ids

    if level not in ("chunk", "paper"):
        raise ConfigError(f"level must be 'chunk' or 'paper', got {level!r}")
    Qv = np.asarray(question_vectors, dtype=np.float32)
    rows_of: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        rows_of.setdefault(p.question_id, []).append(i)
    qids = list(rows_of)
    k = max(2, min(folds, len(qids)))
    order = [qids[i] for i in np.random.default_rng(seed).permutation(len(qids))]
    id_field = "chunk_id" if level == "chunk" else "paper_id"
    alphas = sorted({1.0, *map(float, alphas)}, reverse=True)
    sims, proj_rr, novel = [], [], []
    fb_rr: dict[float, list[float]] = {a: [] for a in alphas}
    done = 0

    def rr(vector: np.ndarray, relevant: set[str]) -> float:
        ranked = list(dict.fromkeys(knn_ids(es, vector, index=f"{prefix}chunks", k=depth, id_field=id_field)))
        return next((1.0 / (r + 1) for r, d in enumerate(ranked) if d in relevant), 0.0)

    for f in range(k):
        held = set(order[f::k])
        train_rows = [i for i, p in enumerate(pairs) if p.question_id not in held]
        if not train_rows:
            continue
        heads = build_heads(
            [pairs[i] for i in train_rows], Qv[train_rows], answer_vectors, model="tuning", tau=tau
        )
        known = set(heads.answer_ids)
        for qid in order[f::k]:
            q = Qv[rows_of[qid][0]]
            relevant = {pairs[i].answer_id for i in rows_of[qid]}
            routing = route(q, heads.centroids, heads.answers, tau=tau)
            sims.append(routing.max_similarity)
            novel.append(not relevant & known)
            proj_rr.append(rr(routing.vector, relevant))
            for a in alphas:
                fb_rr[a].append(rr(blend(q, routing.vector, a), relevant))
            done += 1
            if on_progress:
                on_progress(done, len(qids))
    return choose_fallback(
        np.array(sims),
        np.array(proj_rr),
        {a: np.array(v) for a, v in fb_rr.items()},
        np.array(novel),
        max_novel_loss=max_novel_loss,
    )


# --- the whole run -----------------------------------------------------------------------------
@dataclass
class TrainSummary:
    name: str
    index: str
    pairs: int
    questions: int
    heads: int
    missing_answers: int
    multi_question_heads: int  # heads with 2+ questions
    threshold: float
    alpha: float
    tuning: FallbackChoice | None = None
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        fallback = f"fallback below {self.threshold:.3f} (alpha {self.alpha:g})"
        if self.tuning is not None:
            fallback += (
                f", tuned: MRR {self.tuning.mrr:.3f}, {self.tuning.projected_share:.0%} of the training "
                "questions projected"
            )
        return (
            f"heads {self.name!r}: {self.heads} heads from {self.pairs} pairs ({self.questions} questions; "
            f"{self.multi_question_heads} heads with 2+ questions); {fallback} -> {self.index}"
            + (
                f"; {self.missing_answers} answer ids not in the index were skipped"
                if self.missing_answers
                else ""
            )
        )


def train_heads(
    es,
    dataset: str | Path,
    *,
    fmt: str = "auto",
    split: str | None = "train",
    name: str = DEFAULT_NAME,
    prefix: str | None = None,
    embedder=None,
    tau: float = DEFAULT_TAU,
    threshold: float | None = None,
    alpha: float = 1.0,
    tune: bool = False,
    on_warning: Callable[[str], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> TrainSummary:
    """Read the pairs of ``split``, embed questions and answers, build the heads and store them as
    ``<prefix>heads-<name>`` in the engine/cluster ``es``, whose ``<prefix>chunks``/``papers``
    must hold the dataset's corpus (``prefix`` None: the prefix ``eval`` indexes the dataset under,
    e.g. ``scifact-``, ``qasper-train-``). The fallback threshold: ``threshold``; with ``tune``, chosen
    by :func:`tune_fallback` (α too); else :data:`~projection.heads.DEFAULT_THRESHOLD`."""
    from querybuilder.run import check_model, index_meta
    from scholar_es.projection.store import save_heads

    check_name(name)
    if tune and threshold is not None:
        raise ConfigError(
            f"pass either --threshold ({threshold}) or --tune, not both: --tune chooses the threshold"
        )
    warnings: list[str] = []

    def warn(msg: str) -> None:
        warnings.append(msg)
        if on_warning:
            on_warning(msg)

    ds = load_judged(dataset, fmt, split)
    fmt, split = ds.format, ds.split
    prefix = ds.default_prefix if prefix is None else prefix
    pairs = pairs_of(ds, on_warning=warn)
    if not pairs:
        raise ConfigError(f"split {split!r} of {str(dataset)!r} has no judged (question, answer) pairs")
    meta = index_meta(es, f"{prefix}chunks")
    if embedder is None:
        from indexer.embedder import DEFAULT_MODEL, Embedder

        embedder = Embedder(meta.get("embedding_model") or DEFAULT_MODEL)
    check_model(meta, model=embedder.name)
    answers = resolve_answers(es, [p.answer_id for p in pairs], prefix)
    missing = sorted({p.answer_id for p in pairs} - set(answers))
    if missing:
        warn(
            f"{len(missing)} answer ids are in neither {prefix}chunks nor {prefix}papers and get no head "
            f"(e.g. {missing[0]!r}); was the dataset's corpus indexed with --prefix {prefix!r}?"
        )
    used = [p for p in pairs if p.answer_id in answers]
    if not used:
        raise ConfigError(
            f"none of the {len(pairs)} answer ids of {str(dataset)!r} ({split}) is in {prefix}chunks or "
            f"{prefix}papers (e.g. {pairs[0].answer_id!r}); index the dataset's corpus into this "
            f"target first (scholar-es index {dataset} --format {fmt} --prefix {prefix!r})"
        )
    answer_ids = list(dict.fromkeys(p.answer_id for p in used))
    A = embedder.encode([answers[a][0] for a in answer_ids])
    Qv = embedder.encode([question_text(p.question) for p in used])
    check_model(meta, dims=int(Qv.shape[1]))
    answer_vectors = dict(zip(answer_ids, A, strict=True))
    levels = {answers[a][1] for a in answer_ids}
    level = "chunk" if levels == {"chunk"} else "paper"
    choice = None
    if tune:
        choice = tune_fallback(
            es, used, Qv, answer_vectors, prefix=prefix, level=level, tau=tau, on_progress=on_progress
        )
        threshold, alpha = choice.threshold, choice.alpha
    questions = len({p.question_id for p in used})
    info = {
        "dataset": str(dataset),
        "format": fmt,
        "split": split,
        "prefix": prefix,
        "pairs": len(used),
        "questions": questions,
        "answer_level": level,
        "trained_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if choice is not None:
        info["tuning"] = {
            k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in asdict(choice).items()
        }
    heads = build_heads(
        used,
        Qv,
        answer_vectors,
        model=embedder.name,
        name=name,
        tau=tau,
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        alpha=alpha,
        info=info,
    )
    index = save_heads(es, heads, prefix=prefix)
    return TrainSummary(
        name=name,
        index=index,
        pairs=len(used),
        questions=questions,
        heads=len(heads),
        missing_answers=len(missing),
        multi_question_heads=int((heads.n_questions >= 2).sum()),
        threshold=heads.threshold,
        alpha=heads.alpha,
        tuning=choice,
        warnings=warnings,
    )
