"""``scholar-es tune``: fit the hybrid profile's numbers to the judgments of a TRAIN split.

What is tuned (everything else stays the base profile's):

1. the field boosts (a few variants, :data:`FIELD_BOOSTS`; with ``--scope paper`` the
   single-paper boosts, :data:`PAPER_SCOPE_BOOSTS`), the hybrid weights and the BM25
   normalization: ``bm25_weight`` (``knn_weight`` stays 1 -- only the ratio matters) and
   ``saturation_k``, the BM25 score at which the text part reaches half its weight; objective
   nDCG@10 of the ``hybrid`` strategy;
2. with those fixed, the section multipliers of the ``sections`` strategy; objective MRR@10
   (multipliers are for the top of the list). Two families are searched:

   * ``scaled``: the profile's hand-set multipliers with their strength scaled,
     ``m -> 1 + a (m - 1)``, a in :data:`STRENGTHS` (a = 0 is no multipliers);
   * ``learned``: one multiplier per (intent rule, section type) estimated from the train
     judgments: ``lift = P(type | relevant, rule) / P(type | candidate, rule)`` (how much more
     often relevant chunks come from that section type than chunks in general, for questions of
     that rule), shrunk toward 1 (:func:`learn_lifts`), and tempered: ``m = lift ** b``, b in
     :data:`EXPONENTS` (b = 0 is no multipliers). Whether learning helps is answered by
     cross-validation: lifts learned and b chosen on the other folds, scored on the held-out one.

How it stays fast without cutting corners: the hybrid score of a chunk is a closed formula of
two numbers the engine computes once per query -- its BM25 score ``s`` and its vector
similarity ``v`` = (1 + cos) / 2 -- and the multiplier of its section type::

    score = m(section_type, rule) * (bm25_weight * s / (s + saturation_k) + knn_weight * v)

(the text part 0 when the chunk does not match the text; :mod:`querybuilder.dsl` builds exactly
this). With the profile's ``rescore_window`` 0, ``v`` counts only inside the kNN top k (the
``bool.should`` union alone); otherwise the first pass (:func:`querybuilder.dsl.window_query`:
the kNN top k first, then the text-only chunks by BM25) picks the rescore window
(:func:`querybuilder.dsl.rescore_window`: ``knn_k + text_candidates``, at least 100) and those
chunks are scored by the formula with ``v`` for every one of them (the rescore).
:func:`collect_candidates` fetches, per query, the BM25 top ``max(100, window)``, the kNN top k,
the BM25 scores of the kNN-only chunks (an ``ids`` filter) and, for the rescore, the vector
similarity of every candidate (a ``script_score`` on an ``ids`` filter), so every grid point is
re-ranked in numpy (the evaluation's profile has no per-paper cap, so no ``collapse``). The
result is exact for the top 100 when no multiplier exceeds 1; with larger multipliers only the
tail of the top 100 can differ. The chosen profile is then run for real by
:func:`evaluation.runner.evaluate` on the train split (the ``check`` numbers must agree with
the simulated ones) before anyone looks at another split.

With ``folds`` > 1 the report also gives k-fold cross-validated numbers on the train split
(each fold scored with the parameters chosen on the other folds): the honest estimate of what
tuning gains, on data sets whose test split is held out (SciFact).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

from scholar_es.errors import ConfigError, InputError
from scholar_es.evaluation.datasets import Dataset
from scholar_es.evaluation.metrics import mean_scores, score_rankings
from scholar_es.evaluation.runner import (
    _filters,
    _ranking,
    check_options,
    embed_questions,
    ensure_index,
    eval_profile,
    run_evaluation,
)

if TYPE_CHECKING:
    from querybuilder.profiles import Profile

BM25_WEIGHTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
SATURATION_KS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
STRENGTHS = (0.0, 0.5, 1.0, 2.0, 3.0, 5.0)
EXPONENTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
PRIOR_COUNT = 10.0
#: field-boost variants (label -> Profile.field_boosts, None = the base profile's).
FIELD_BOOSTS: dict[str, dict[str, dict[str, float]] | None] = {
    "profile boosts": None,
    "chunk text only": {t: {"chunk_text": 1.0} for t in ("keyword", "section", "survey", "balanced")},
    "chunk text + heading": {
        t: {"chunk_text": 1.0, "section_heading": 0.5} for t in ("keyword", "section", "survey", "balanced")
    },
    "chunk text + heading x1": {
        t: {"chunk_text": 1.0, "section_heading": 1.0} for t in ("keyword", "section", "survey", "balanced")
    },
}
#: the same for ``--scope paper``, where a single-paper search uses the profile's
#: ``paper_scope_boosts`` (label -> paper_scope_boosts, None = the base profile's)
PAPER_SCOPE_BOOSTS: dict[str, dict[str, float] | None] = {
    "profile boosts": None,
    "chunk text only": {"chunk_text": 1.0},
    "chunk text + heading x0.5": {"chunk_text": 1.0, "section_heading": 0.5},
    "chunk text + heading x2": {"chunk_text": 1.0, "section_heading": 2.0},
}
DEPTH = 100
FIELDS = ["chunk_id", "paper_id", "paragraph_ids", "section_type"]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Candidates:
    """One query's chunks: everything the hybrid formula needs."""

    hits: list[dict]  # _source of each chunk (chunk_id, paper_id, paragraph_ids, section_type)
    bm25: np.ndarray  # BM25 score (0: does not match the text)
    matched: np.ndarray  # bool: matches the text query
    knn: np.ndarray  # kNN similarity (0: outside the kNN top k)
    rule: str  # the intent rule of the question
    order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # engine order (ties)
    #: the vector similarity (1 + cos) / 2 of every candidate (the rescore's); None: no rescore
    vec: np.ndarray | None = None
    rescore_window: int = 0
    #: the two-phase rescore (corpus-wide, querybuilder.dsl.hybrid_rescore): the recall formula's
    #: (bm25_weight, saturation_k) ordering the window and the main formula's top window; None: one phase
    recall: tuple[float, float] | None = None
    top_window: int = 0


def collect_candidates(
    es, dataset: Dataset, embedder, *, scope: str, profile, prefix: str, progress: bool = True
) -> dict[str, Candidates]:
    from elasticsearch.dsl import Q
    from tqdm import tqdm

    from querybuilder.dsl import recall_phase, rescore_window
    from querybuilder.request import SearchRequest
    from querybuilder.strategies import build_one, make_plan

    vectors = embed_questions(dataset, embedder, progress=progress)
    out: dict[str, Candidates] = {}
    for q in tqdm(
        dataset.queries,
        desc="collecting candidates",
        unit=" q",
        file=sys.stderr,
        disable=None if progress else True,
        dynamic_ncols=True,
        leave=False,
    ):
        filters = _filters(dataset, q, scope)
        request = SearchRequest(q.text, profile=profile, size=DEPTH, filters=filters, prefix=prefix)
        text_plan = make_plan(request, strategy="bm25")
        knn_plan = make_plan(request, strategy="dense")
        hybrid_plan = make_plan(request, strategy="hybrid")
        if knn_plan.knn_k != hybrid_plan.knn_k:  # pragma: no cover - both derive it from size and profile
            raise ConfigError("the kNN k of the dense and hybrid plans differ; cannot simulate hybrid")
        vector = vectors[knn_plan.question]
        found: dict[str, dict] = {}
        bm25: dict[str, float] = {}
        knn: dict[str, float] = {}
        window = rescore_window(hybrid_plan) if profile_window(profile) > 0 else 0
        cascade = recall_phase(hybrid_plan) if window and hybrid_plan.has_text else None
        if text_plan.has_text:  # deep enough for every text-only hit of the rescore window
            text_body = build_one(text_plan).source(list(FIELDS)).extra(size=max(DEPTH, window)).to_dict()
            resp = es.search(index=text_plan.index, body=text_body).body
            for h in resp["hits"]["hits"]:
                found[h["_id"]] = h["_source"]
                bm25[h["_id"]] = float(h["_score"])
        resp = es.search(
            index=knn_plan.index, body=build_one(knn_plan, vector).source(list(FIELDS)).to_dict()
        ).body
        for h in resp["hits"]["hits"]:
            found.setdefault(h["_id"], h["_source"])
            knn[h["_id"]] = float(h["_score"])
        missing = [d for d in knn if d not in bm25]
        if text_plan.has_text and missing:
            search = (
                build_one(text_plan).source(False).filter(Q("ids", values=missing)).extra(size=len(missing))
            )
            resp = es.search(index=text_plan.index, body=search.to_dict()).body
            for h in resp["hits"]["hits"]:
                bm25[h["_id"]] = float(h["_score"])
        ids = list(found)
        vec = None
        if profile_window(profile) > 0 and ids:
            vec = vector_scores(es, knn_plan.index, ids, vector)
        out[q.id] = Candidates(
            hits=[{**found[d], "chunk_id": found[d].get("chunk_id", d)} for d in ids],
            bm25=np.array([bm25.get(d, 0.0) for d in ids]),
            matched=np.array([d in bm25 for d in ids]),
            knn=np.array([knn.get(d, 0.0) for d in ids]),
            rule=hybrid_plan.intent.rule,
            order=np.arange(len(ids)),
            vec=vec,
            rescore_window=window,
            recall=cascade[0] if cascade else None,
            top_window=cascade[1] if cascade else 0,
        )
    return out


def profile_window(profile) -> int:
    from querybuilder.profiles import Profile, load_profile

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    return prof.rescore_window


def vector_scores(es, index: str, ids: list[str], vector) -> np.ndarray:
    """(1 + cos) / 2 of each of ``ids`` with the question's vector, by the rescore's own script
    (:data:`querybuilder.dsl.VECTOR_SCRIPT`, weight 1) on an ``ids`` query."""
    from elasticsearch.dsl import Q, Search

    from querybuilder.dsl import VECTOR_SCRIPT, as_query_vector

    query = Q(
        "script_score",
        query=Q("ids", values=ids),
        script={"source": VECTOR_SCRIPT, "params": {"query_vector": as_query_vector(vector), "w": 1.0}},
    )
    body = Search().query(query).source(False).extra(size=len(ids)).to_dict()
    got = {h["_id"]: float(h["_score"]) for h in es.search(index=index, body=body).body["hits"]["hits"]}
    return np.array([got.get(d, 0.0) for d in ids])


@dataclass(frozen=True)
class Params:
    bm25_weight: float = 1.0
    knn_weight: float = 1.0
    saturation_k: float = 10.0
    #: rule -> section type -> multiplier (empty: no multipliers)
    multipliers: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()

    def multiplier_dict(self) -> dict[str, dict[str, float]]:
        return {rule: dict(m) for rule, m in self.multipliers}


def _freeze(mults: dict[str, dict[str, float]]) -> tuple:
    return tuple(sorted((r, tuple(sorted(m.items()))) for r, m in mults.items()))


def simulate(dataset: Dataset, cands: dict[str, Candidates], p: Params) -> dict[str, list[str]]:
    """Rankings (at the dataset's level) of the hybrid formula with ``p`` (see the module doc)."""
    from querybuilder.dsl import WINDOW_TEXT_WEIGHT

    mults = p.multiplier_dict()
    out = {}
    for qid, c in cands.items():
        text = _saturated(c, p.bm25_weight, p.saturation_k)
        score = text + p.knn_weight * c.knn
        rule = mults.get(c.rule, {})
        m = np.array([rule.get(h.get("section_type", ""), 1.0) for h in c.hits]) if rule else 1.0
        score = score * m
        first, final, window = score, score, len(score)
        if c.vec is not None:  # the rescore: the first pass's window, scored with both signals
            # the first pass of a rescored hybrid (querybuilder.dsl.window_query): the text part
            # weighted WINDOW_TEXT_WEIGHT, so the kNN top k come first, then the text-only hits
            first = (_saturated(c, WINDOW_TEXT_WEIGHT, p.saturation_k) + p.knn_weight * c.knn) * m
            final = (text + p.knn_weight * c.vec) * m
            window = max(c.rescore_window, DEPTH)
        if c.vec is not None and c.recall is not None:
            # phase 1: the recall formula orders the window; phase 2: its top window by the main one
            recall = (_saturated(c, *c.recall) + p.knn_weight * c.vec) * m
            top = plain_ranking(c, first, recall, window, depth=c.top_window)
            top = top[np.lexsort((c.order[top], -final[top]))][:DEPTH]
        else:
            top = plain_ranking(c, first, final, window)
        out[qid] = _ranking(dataset, [c.hits[i] for i in top], dataset.qrels.get(qid, {}))
    return out


def _saturated(c: Candidates, weight: float, k: float) -> np.ndarray:
    """``weight * s / (s + k)`` of each candidate's BM25 score ``s`` (0 where the text does not match)."""
    return np.where(c.matched, weight * c.bm25 / (c.bm25 + k), 0.0)


def plain_ranking(
    c: Candidates, first: np.ndarray, final: np.ndarray, window: int, depth: int = DEPTH
) -> np.ndarray:
    """The top ``depth`` candidates: the first pass's top ``window`` ordered by ``final``."""
    win = np.lexsort((c.order, -first))[:window]
    return win[np.lexsort((c.order[win], -final[win]))][:depth]


def scale_multipliers(base: dict[str, dict[str, float]], strength: float) -> dict[str, dict[str, float]]:
    return {
        r: {t: 1.0 + strength * (m - 1.0) for t, m in ms.items() if 1.0 + strength * (m - 1.0) > 0}
        for r, ms in base.items()
    }


#: per query: (intent rule, chunks per section type, relevant chunks per section type)
SectionCounts = dict[str, tuple[str, dict[str, float], dict[str, float]]]


def candidate_section_counts(dataset: Dataset, cands: dict[str, Candidates]) -> SectionCounts:
    """Section types of each query's candidates, and of its relevant candidates."""
    out: SectionCounts = {}
    for qid, c in cands.items():
        judged = dataset.qrels.get(qid, {})
        base: dict[str, float] = {}
        rel: dict[str, float] = {}
        for h in c.hits:
            t = h.get("section_type") or "other"
            base[t] = base.get(t, 0.0) + 1.0
            if dataset.level == "paper":
                hit = h.get("paper_id") in judged
            else:
                hit = any(p in judged for p in (h.get("paragraph_ids") or [h.get("chunk_id")]))
            if hit:
                rel[t] = rel.get(t, 0.0) + 1.0
        out[qid] = (c.rule, base, rel)
    return out


def paper_section_counts(dataset: Dataset) -> SectionCounts:
    """QASPER without any search: the section types of all paragraphs of each question's paper,
    and of its evidence paragraphs (what scope-paper candidates hold, as every paragraph of the
    paper is a candidate). Cheap for a whole train split: no embedding, no index."""
    from indexer.chunker import chunk_paper
    from indexer.readers import read_papers
    from querybuilder.intent import analyze
    from querybuilder.plan import clean_question

    if dataset.format != "qasper":
        raise ConfigError("section statistics from the papers need a qasper dataset")
    types: dict[str, dict[str, str]] = {}  # paper -> paragraph id -> section type
    for paper in read_papers(dataset.corpus, "qasper"):
        if not isinstance(paper, InputError):
            types[paper.id] = {c.id: c.section_type for c in chunk_paper(paper, "paragraph")}
    out: SectionCounts = {}
    for q in dataset.queries:
        paras = types.get(q.paper_id or "", {})
        if not paras:
            continue
        base: dict[str, float] = {}
        for t in paras.values():
            base[t] = base.get(t, 0.0) + 1.0
        rel: dict[str, float] = {}
        for p in dataset.qrels.get(q.id, {}):
            if p in paras:
                rel[paras[p]] = rel.get(paras[p], 0.0) + 1.0
        out[q.id] = (analyze(clean_question(q.text)[1]).rule, base, rel)
    return out


def lifts_from_counts(
    counts: SectionCounts, queries: Sequence[str] | None = None
) -> dict[str, dict[str, float]]:
    """Per intent rule and section type: relevant chunks seen / expected, shrunk toward 1.

    For the questions of a rule (``queries``: a subset, else all), ``E_t`` = (relevant chunks)
    x (share of type t among the chunks searched) is how many relevant chunks of type t there
    would be if the section type did not matter, ``r_t`` how many there are; the lift is
    ``(r_t + PRIOR_COUNT) / (E_t + PRIOR_COUNT)`` (a Poisson-Gamma posterior mean with
    :data:`PRIOR_COUNT` pseudo-observations at lift 1: rare cells stay near 1).
    """
    base: dict[str, dict[str, float]] = {}
    rel: dict[str, dict[str, float]] = {}
    for qid in queries if queries is not None else counts:
        if qid not in counts:
            continue
        rule, b, r = counts[qid]
        for t, n in b.items():
            base.setdefault(rule, {})[t] = base.setdefault(rule, {}).get(t, 0.0) + n
        for t, n in r.items():
            rel.setdefault(rule, {})[t] = rel.setdefault(rule, {}).get(t, 0.0) + n
    lifts: dict[str, dict[str, float]] = {}
    for rule, b in base.items():
        total = sum(b.values())
        r = rel.get(rule, {})
        r_total = sum(r.values())
        lifts[rule] = {
            t: (r.get(t, 0.0) + PRIOR_COUNT) / (r_total * n / total + PRIOR_COUNT)
            for t, n in sorted(b.items())
        }
    return lifts


def learn_lifts(
    dataset: Dataset, cands: dict[str, Candidates], queries: Sequence[str] | None = None
) -> dict[str, dict[str, float]]:
    """:func:`lifts_from_counts` of the candidates' section types."""
    return lifts_from_counts(candidate_section_counts(dataset, cands), queries)


def temper(lifts: dict[str, dict[str, float]], exponent: float) -> dict[str, dict[str, float]]:
    return {
        r: {t: round(float(v) ** exponent, 4) for t, v in ls.items() if exponent and abs(v - 1) > 1e-9}
        for r, ls in lifts.items()
    }


@dataclass
class GridPoint:
    params: Params
    label: str
    per_query: dict[str, dict[str, float]]
    means: dict[str, float]
    variant: str = ""  # the field-boost variant whose candidates were ranked


def _score_grid(dataset, cands, points: list[tuple[str, Params]], progress: bool) -> list[GridPoint]:
    from tqdm import tqdm

    out = []
    for label, p in tqdm(
        points, desc="grid", unit=" pt", file=sys.stderr, disable=None if progress else True, leave=False
    ):
        per = score_rankings(dataset.qrels, simulate(dataset, cands, p))
        out.append(GridPoint(params=p, label=label, per_query=per, means=mean_scores(per)))
    return out


def _best(points: Sequence[GridPoint], objective: str, queries: Sequence[str] | None = None) -> GridPoint:
    def value(g: GridPoint) -> float:
        scores = g.per_query[objective]
        return float(np.mean([scores[q] for q in queries])) if queries is not None else g.means[objective]

    return max(points, key=value)  # first best wins: grids list the default-like values first


def cross_validate(
    points: Sequence[GridPoint], objective: str, folds: int, baseline: GridPoint
) -> dict[str, float]:
    """Mean held-out ``objective`` (and MRR/P@3) of the point chosen on the other folds, vs baseline."""
    qids = list(points[0].per_query[objective])
    if folds < 2 or len(qids) < folds:
        return {}
    metrics = ("ndcg@10", "mrr@10", "p@3")
    tuned = dict.fromkeys(metrics, 0.0)
    for f in range(folds):
        held = [q for i, q in enumerate(qids) if i % folds == f]
        train = [q for i, q in enumerate(qids) if i % folds != f]
        chosen = _best(points, objective, train)
        for m in metrics:
            tuned[m] += sum(chosen.per_query[m][q] for q in held)
    out = {f"cv_tuned_{m}": v / len(qids) for m, v in tuned.items()}
    out.update({f"cv_base_{m}": baseline.means[m] for m in metrics})
    return out


def cross_validate_sections(
    data: Dataset,
    cands: dict[str, Candidates],
    w: Params,
    mpoints: Sequence[GridPoint],
    folds: int,
    counts: SectionCounts,
    progress: bool = False,
) -> dict[str, dict[str, float]]:
    """Held-out means (nDCG@10, MRR@10, P@3) of: no multipliers, the hand-set ones, and the learned
    ones with lifts AND exponent chosen on the other folds (MRR@10), fold by fold."""
    qids = list(cands)
    if folds < 2 or len(qids) < folds:
        return {}
    metrics = ("ndcg@10", "mrr@10", "p@3")
    by_label = {g.label: g for g in mpoints}
    sums = {
        k: dict.fromkeys(metrics, 0.0)
        for k in ("no multipliers", "hand-set multipliers", "learned on the other folds")
    }
    for f in range(folds):
        held = [q for i, q in enumerate(qids) if i % folds == f]
        train = [q for i, q in enumerate(qids) if i % folds != f]
        lifts = lifts_from_counts(counts, [q for q in counts if q not in set(held)])
        fold_points = _score_grid(
            data,
            cands,
            [
                (f"b={b:g}", Params(w.bm25_weight, w.knn_weight, w.saturation_k, _freeze(temper(lifts, b))))
                for b in EXPONENTS
            ],
            False,
        )
        chosen = _best(fold_points, "mrr@10", train)
        for label, g in (
            ("no multipliers", by_label["scaled a=0"]),
            ("hand-set multipliers", by_label["scaled a=1"]),
            ("learned on the other folds", chosen),
        ):
            for m in metrics:
                sums[label][m] += sum(g.per_query[m][q] for q in held)
    return {k: {m: v / len(qids) for m, v in ms.items()} for k, ms in sums.items()}


@dataclass
class TuneResult:
    profile: Profile
    weights: GridPoint
    baseline: GridPoint
    sections: GridPoint | None
    no_sections: GridPoint | None
    grid_size: int
    cv: dict[str, float]
    check: dict[str, dict[str, float]] = field(default_factory=dict)
    lifts: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)
    points: list[GridPoint] = field(default_factory=list)  # stage 1, base profile first
    section_points: list[GridPoint] = field(default_factory=list)  # stage 2
    #: held-out means of: no multipliers, the hand-set ones, learned (lifts and b from the other folds)
    section_cv: dict[str, dict[str, float]] = field(default_factory=dict)
    paper: bool = False  # tuned with --scope paper: the weights are the profile's paper_scope_* ones


def tune(
    dataset: Dataset,
    es,
    embedder,
    *,
    scope: str = "corpus",
    profile=None,
    prefix: str | None = None,
    limit: int | None = None,
    folds: int = 5,
    sections: bool = True,
    name: str | None = None,
    boost_variants: dict[str, dict | None] | None = None,
    lift_source: Dataset | None = None,
    verify: bool = True,
    progress: bool = True,
) -> TuneResult:
    """Tune on ``dataset`` (a TRAIN split: the caller's promise) and return the tuned profile.

    ``boost_variants``: field-boost settings to try, label -> ``field_boosts`` (scope paper:
    ``paper_scope_boosts``; None: the base profile's); default :data:`FIELD_BOOSTS`
    (:data:`PAPER_SCOPE_BOOSTS`). Each costs one pass of candidate collection.
    ``lift_source``: learn the section lifts from this QASPER dataset's papers and qrels
    (:func:`paper_section_counts`: e.g. the whole train split when ``dataset`` is its first N
    papers) instead of from the candidates; cross-validation leaves the held-out questions out.
    """
    start = time.perf_counter()
    check_options(dataset, ["hybrid"], scope)
    data = dataset.limited(limit)
    base = eval_profile(profile)
    info = ensure_index(es, data, embedder, prefix=prefix, progress=progress)
    log: list[str] = []

    # 1. field boosts x hybrid weights x saturation, no multipliers
    paper = scope == "paper"  # inside one paper the profile's paper_scope_* weights apply
    default = Params(
        bm25_weight=base.paper_scope_bm25_weight if paper else base.bm25_weight,
        knn_weight=base.knn_weight,
        saturation_k=base.paper_scope_saturation_k if paper else base.saturation_k,
    )
    grid = [
        (
            f"bm25_weight={w:g} saturation_k={k:g}",
            Params(bm25_weight=w, knn_weight=base.knn_weight, saturation_k=k),
        )
        for w, k in product(BM25_WEIGHTS, SATURATION_KS)
    ]
    boost_key = "paper_scope_boosts" if scope == "paper" else "field_boosts"
    if boost_variants is not None:
        variants = boost_variants
    else:
        variants = PAPER_SCOPE_BOOSTS if scope == "paper" else FIELD_BOOSTS
    points: list[GridPoint] = []
    cands_of: dict[str, dict[str, Candidates]] = {}
    for variant, boosts in variants.items():
        prof = base if boosts is None else base.with_changes(**{boost_key: boosts})
        cands_of[variant] = collect_candidates(
            es, data, embedder, scope=scope, profile=prof, prefix=info.prefix, progress=progress
        )
        todo = ([("base profile", default)] if not points else []) + grid
        for g in _score_grid(data, cands_of[variant], todo, progress):
            g.variant = variant
            g.label = g.label if g.label == "base profile" else f"{variant}: {g.label}"
            points.append(g)
    baseline = points[0]
    weights = _best(points, "ndcg@10")
    cands = cands_of[weights.variant]
    cv = cross_validate(points, "ndcg@10", folds, baseline)
    log.append(
        f"hybrid weights: base nDCG@10 {baseline.means['ndcg@10']:.4f} -> {weights.means['ndcg@10']:.4f} "
        f"with {weights.label} ({len(points)} points)"
    )

    # 2. section multipliers on top of the chosen weights
    sect = no_sect = None
    section_cv: dict[str, dict[str, float]] = {}
    mpoints: list[GridPoint] = []
    lifts: dict[str, dict[str, float]] = {}
    chosen_mults: dict[str, dict[str, float]] = {}
    types = {h.get("section_type") for c in cands.values() for h in c.hits}
    mult_key = "paper_scope_section_multipliers" if scope == "paper" else "section_multipliers"
    if sections and len(types) > 1:
        w = weights.params
        hand = getattr(base, mult_key)
        counts = (
            candidate_section_counts(data, cands)
            if lift_source is None
            else paper_section_counts(lift_source)
        )
        lifts = lifts_from_counts(counts)
        log.append(
            f"section lifts learned from {len(counts)} questions"
            + (f" of {lift_source.name} {lift_source.split} (papers and qrels only)" if lift_source else "")
        )
        mgrid = [
            (
                f"scaled a={a:g}",
                Params(w.bm25_weight, w.knn_weight, w.saturation_k, _freeze(scale_multipliers(hand, a))),
            )
            for a in STRENGTHS
        ]
        mgrid += [
            (
                f"learned b={b:g}",
                Params(w.bm25_weight, w.knn_weight, w.saturation_k, _freeze(temper(lifts, b))),
            )
            for b in EXPONENTS
            if b > 0
        ]
        mpoints = _score_grid(data, cands, mgrid, progress)
        no_sect = mpoints[0]  # a = 0: the same weights without multipliers
        sect = _best(mpoints, "mrr@10")
        chosen_mults = sect.params.multiplier_dict()
        log.append(
            f"section multipliers: none MRR@10 {no_sect.means['mrr@10']:.4f} P@3 {no_sect.means['p@3']:.4f}"
            f" -> {sect.label}: MRR@10 {sect.means['mrr@10']:.4f} P@3 {sect.means['p@3']:.4f}"
        )
        for g in mpoints:
            log.append(
                f"  {g.label:<16} nDCG@10 {g.means['ndcg@10']:.4f} MRR@10 {g.means['mrr@10']:.4f} "
                f"P@3 {g.means['p@3']:.4f} R@100 {g.means['recall@100']:.4f}"
            )
        section_cv = cross_validate_sections(data, cands, w, mpoints, folds, counts, progress)
        for label, m in section_cv.items():
            log.append(
                f"  cross-validated ({folds} folds) {label:<34} nDCG@10 {m['ndcg@10']:.4f} "
                f"MRR@10 {m['mrr@10']:.4f} P@3 {m['p@3']:.4f}"
            )
    from querybuilder.intent import RULES

    changes = {
        "name": name or f"tuned-{data.name}-{data.split}",
        "description": (
            f"tuned by scholar-es tune on {data.name} {data.split} ({len(data.queries)} queries, "
            f"scope {scope}): {weights.label}"
            + (f"; section multipliers {sect.label}" if sect else "")
            + (
                f" (lifts from {len(counts)} questions of {lift_source.name} {lift_source.split})"
                if sect and lift_source is not None
                else ""
            )
        ),
        ("paper_scope_bm25_weight" if paper else "bm25_weight"): weights.params.bm25_weight,
        "knn_weight": weights.params.knn_weight,
        ("paper_scope_saturation_k" if paper else "saturation_k"): weights.params.saturation_k,
        "per_paper_cap": (profile_cap(profile)),
    }
    if variants[weights.variant] is not None:
        changes[boost_key] = variants[weights.variant]
    if sect is not None:
        changes[mult_key] = {r: chosen_mults.get(r, {}) for r in RULES}
    tuned = base.with_changes(**changes)
    result = TuneResult(
        profile=tuned,
        weights=weights,
        baseline=baseline,
        sections=sect,
        no_sections=no_sect,
        grid_size=len(points) + len(mpoints),
        cv=cv,
        lifts=lifts,
        log=log,
        points=points,
        section_points=mpoints,
        section_cv=section_cv,
        paper=paper,
    )
    if verify:  # the real thing, on the same (train) queries: must agree with the simulation
        strategies = ["hybrid", "sections"] if sect else ["hybrid"]
        ev = run_evaluation(
            data, strategies, es, embedder, scope=scope, profile=tuned, prefix=info.prefix, progress=progress
        )
        result.check = ev.metrics
        sim = {"hybrid": (no_sect or weights).means, "sections": sect.means if sect else {}}
        for s in strategies:
            gap = abs(ev.metrics[s]["ndcg@10"] - sim[s]["ndcg@10"])
            log.append(
                f"check {s}: engine nDCG@10 {ev.metrics[s]['ndcg@10']:.4f} vs simulated "
                f"{sim[s]['ndcg@10']:.4f} (gap {gap:.4f})"
            )
    result.seconds = time.perf_counter() - start
    return result


def profile_cap(profile) -> int:
    """The per-paper cap of the profile the user gave (evaluation runs without it; the saved profile keeps it)."""
    from querybuilder.profiles import Profile, load_profile

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    return prof.per_paper_cap


def report_lines(result: TuneResult, top: int = 5) -> list[str]:
    lines = list(result.log)
    ranked = sorted(result.points, key=lambda g: -g.means["ndcg@10"])[:top]
    lines.append(f"best {len(ranked)} weight settings (train nDCG@10 / MRR@10 / R@100):")
    lines.extend(
        f"  {g.label:<58} {g.means['ndcg@10']:.4f} / {g.means['mrr@10']:.4f} / {g.means['recall@100']:.4f}"
        for g in ranked
    )
    if result.cv:
        cv = result.cv
        lines.append(
            f"{len(result.baseline.per_query['ndcg@10'])}-query train split, cross-validated: nDCG@10 "
            f"{cv['cv_base_ndcg@10']:.4f} (base) -> {cv['cv_tuned_ndcg@10']:.4f} (tuned on the other "
            f"folds); MRR@10 {cv['cv_base_mrr@10']:.4f} -> {cv['cv_tuned_mrr@10']:.4f}"
        )
    lines.append(
        f"tuned profile {result.profile.name!r}: bm25_weight {result.weights.params.bm25_weight:g}, knn_weight "
        f"{result.profile.knn_weight:g}, saturation_k {result.weights.params.saturation_k:g}"
        + (" (its paper_scope_* weights)" if result.paper else "")
    )
    return lines
