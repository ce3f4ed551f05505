"""DSL building: expected bodies per strategy, round-trips, profiles, plans and rendering (no engine)."""

import json
import random

import pytest
from elasticsearch.dsl import Search

from querybuilder.dsl import SATURATION_SCRIPT, SOURCE_FIELDS, as_query_vector
from querybuilder.plan import MAX_CLAUSES, Filters, clean_question, term_count
from querybuilder.profiles import DEFAULT_PROFILE, Profile, load_profile
from querybuilder.render import dumps, template_id, to_console, to_json
from querybuilder.results import parse_explanation
from querybuilder.run import rrf_fuse
from querybuilder.strategies import BUILDER_STRATEGIES as STRATEGIES
from querybuilder.strategies import build_body, build_search, make_plan, template_script, to_template
from scholar_es.errors import ConfigError, ModelMismatchError

Q = "How do they train the LLM?"
TEXT = "train the LLM?"  # the text query leaves the question words out (profile drop_question_words)
VEC = [0.5, -0.25, 0.125, 1.0]
SRC = list(SOURCE_FIELDS)
FIELDS = ["chunk_text^2", "abstract^1.5", "title"]  # "section" search type (a How question)
MM = {"multi_match": {"query": TEXT, "fields": FIELDS, "type": "best_fields", "tie_breaker": 0.3}}
FILTERS = [{"range": {"year": {"gte": 2018, "lte": 2020}}}, {"terms": {"venue": ["ACL"]}}]
COLLAPSE = {"field": "paper_id", "inner_hits": {"name": "best_chunks", "size": 5, "_source": SRC}}
SATURATED = {
    "script_score": {"query": MM, "script": {"source": SATURATION_SCRIPT, "params": {"k": 100.0, "w": 0.8}}}
}
KNN = {"knn": {"field": "vector", "query_vector": VEC, "k": 50, "num_candidates": 100, "boost": 1.0}}
# the filters also go into the knn clause: Elasticsearch only pre-filters kNN with the clause's own filter
KNN_FILTERED = {"knn": {**KNN["knn"], "filter": FILTERS}}
HYBRID = {"bool": {"should": [SATURATED, KNN_FILTERED], "filter": FILTERS, "minimum_should_match": 1}}


def first_pass(text_part):
    """The first pass of a rescored hybrid: the text part weighted 1e-6 (the kNN top k first, then
    the text-only hits), so the rescore window holds both signals' best."""
    out = json.loads(json.dumps(text_part))
    out["script_score"]["script"]["params"]["w"] = 1e-06
    return out


HYBRID_WINDOW = {
    "bool": {"should": [first_pass(SATURATED), KNN_FILTERED], "filter": FILTERS, "minimum_should_match": 1}
}
HOW_FUNCTIONS = [
    {"filter": {"term": {"section_type": "method"}}, "weight": 1.05},
    {"filter": {"term": {"section_type": "experiments"}}, "weight": 1.025},
]
# the rescore of hybrid (reference: search-your-data/filter-search-results.html#rescore): the top 100
# hits of the union get BOTH signals; the vector part is what a knn query scores a cosine field,
# (1 + cos) / 2, computed by the Painless vector function for every rescored hit
VECTOR_PART = {
    "script_score": {
        "query": {"match_all": {}},
        "script": {
            # a chunk without a vector scores 0 for the vector part (issue 27), never a script_exception
            "source": "doc['vector'].size() == 0 ? 0.0 : "
            "(cosineSimilarity(params.query_vector, 'vector') + 1.0) / 2.0 * params.w",
            "params": {"query_vector": VEC, "w": 1.0},
        },
    }
}


def one_rescore(text_part, functions, window):
    query = {"bool": {"should": [text_part, VECTOR_PART]}}
    if functions:
        query = {
            "function_score": {
                "query": query,
                "functions": functions,
                "score_mode": "max",
                "boost_mode": "multiply",
            }
        }
    return {
        "window_size": window,
        "query": {"rescore_query": query, "query_weight": 0, "rescore_query_weight": 1},
    }


def with_weights(text_part, w, k):
    out = json.loads(json.dumps(text_part))
    out["script_score"]["script"]["params"] = {"k": k, "w": w}
    return out


def rescore_of(text_part, functions=None):
    """Corpus-wide, two phases: the recall formula (recall_bm25_weight 1.5, recall_saturation_k 100)
    orders the window (the kNN top 50 + the text query's best 100), the main formula scores its
    top 100 (top_window)."""
    return [
        one_rescore(with_weights(text_part, 1.5, 100.0), functions, 150),
        one_rescore(text_part, functions, 100),
    ]


EXPANDED_TEXT = {
    "script_score": {
        "query": {
            "bool": {
                "should": [
                    MM,
                    {
                        "multi_match": {
                            "query": "large language model",
                            "fields": FIELDS,
                            "type": "best_fields",
                            "operator": "and",
                            "tie_breaker": 0.3,
                            "boost": 0.4,
                        }
                    },
                ]
            }
        },
        "script": {"source": SATURATION_SCRIPT, "params": {"k": 100.0, "w": 0.8}},
    }
}
RETRIEVER_KNN = {
    "knn": {"field": "vector", "query_vector": VEC, "k": 100, "num_candidates": 100, "filter": FILTERS}
}
RETRIEVER_STD = {"standard": {"query": MM, "filter": FILTERS}}

EXPECTED = {
    "bm25": {
        "query": {"bool": {"must": [MM], "filter": FILTERS}},
        "collapse": COLLAPSE,
        "size": 10,
        "_source": SRC,
    },
    "dense": {
        "query": {
            "knn": {"field": "vector", "query_vector": VEC, "k": 50, "num_candidates": 100, "filter": FILTERS}
        },
        "collapse": COLLAPSE,
        "size": 10,
        "_source": SRC,
    },
    "hybrid": {
        "query": HYBRID_WINDOW,
        "collapse": COLLAPSE,
        "size": 10,
        "_source": SRC,
        "rescore": rescore_of(SATURATED),
    },
    "sections": {
        "query": {
            "function_score": {
                "query": HYBRID_WINDOW,
                "functions": HOW_FUNCTIONS,
                "score_mode": "max",
                "boost_mode": "multiply",
            }
        },
        "collapse": COLLAPSE,
        "size": 10,
        "_source": SRC,
        "rescore": rescore_of(SATURATED, HOW_FUNCTIONS),
    },
    "expanded": {
        "query": {
            "function_score": {
                "query": {
                    "bool": {
                        "should": [
                            first_pass(EXPANDED_TEXT),
                            KNN_FILTERED,
                        ],
                        "filter": FILTERS,
                        "minimum_should_match": 1,
                    }
                },
                "functions": HOW_FUNCTIONS,
                "score_mode": "max",
                "boost_mode": "multiply",
            }
        },
        "collapse": COLLAPSE,
        "size": 10,
        "_source": SRC,
        "rescore": rescore_of(EXPANDED_TEXT, HOW_FUNCTIONS),
    },
    "rrf": {
        "retriever": {
            "rrf": {
                "retrievers": [RETRIEVER_STD, RETRIEVER_KNN],
                "rank_constant": 60,
                "rank_window_size": 100,
            }
        },
        "size": 50,
        "_source": SRC,
    },
    "rrf-client": [
        {"query": {"bool": {"must": [MM], "filter": FILTERS}}, "size": 100, "_source": SRC},
        {
            "query": {
                "knn": {
                    "field": "vector",
                    "query_vector": VEC,
                    "k": 100,
                    "num_candidates": 100,
                    "filter": FILTERS,
                }
            },
            "size": 100,
            "_source": SRC,
        },
    ],
    "linear": {
        "retriever": {
            "linear": {
                "retrievers": [
                    {"retriever": RETRIEVER_STD, "weight": 0.8, "normalizer": "minmax"},  # bm25_weight
                    {"retriever": RETRIEVER_KNN, "weight": 1.0, "normalizer": "minmax"},
                ],
                "rank_window_size": 100,
            }
        },
        "size": 50,
        "_source": SRC,
    },
}


def plan_for(strategy, question=Q, **kw):
    kw.setdefault("filters", {"year_from": 2018, "year_to": 2020, "venues": ["ACL"]})
    return make_plan(question, strategy=strategy, **kw)


def roundtrips(body):
    for d in body if isinstance(body, list) else [body]:
        assert Search.from_dict(json.loads(json.dumps(d))).to_dict() == d


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_expected_body_per_strategy(strategy):
    body = build_body(plan_for(strategy), VEC)
    assert body == EXPECTED[strategy]
    roundtrips(body)


def test_every_strategy_is_expected():
    assert (
        set(EXPECTED)
        == set(STRATEGIES)
        == {"bm25", "dense", "hybrid", "sections", "expanded", "rrf", "rrf-client", "linear"}
    )


def test_build_search_returns_search_objects_and_does_not_mutate_plan():
    plan = plan_for("sections")
    before = plan.model_dump()
    s = build_search(plan, VEC)
    assert isinstance(s, Search)
    pair = build_search(plan_for("rrf-client"), VEC)
    assert isinstance(pair, tuple) and all(isinstance(x, Search) for x in pair)
    assert plan.model_dump() == before
    assert build_search(plan, VEC).to_dict() == s.to_dict()  # deterministic


def test_no_filters_hybrid_and_plain_bm25():
    body = build_body(make_plan(Q, strategy="hybrid"), VEC)
    assert body["query"] == {"bool": {"should": [first_pass(SATURATED), KNN], "minimum_should_match": 1}}
    unrescored = DEFAULT_PROFILE.with_changes(rescore_window=0)  # the first pass is the final score
    body = build_body(make_plan(Q, strategy="hybrid", profile=unrescored), VEC)
    assert body["query"] == {"bool": {"should": [SATURATED, KNN], "minimum_should_match": 1}}
    assert build_body(make_plan(Q, strategy="bm25"), None)["query"] == MM


def test_empty_and_symbol_questions_have_no_text_part():
    for q in ("", "   ", "?!", "🙂🙂", "\x00\x01"):
        plan = make_plan(q, strategy="hybrid")
        assert plan.text == ""
        body = build_body(plan, VEC)
        assert body["query"]["bool"]["should"] == [KNN]  # kNN alone
        assert build_body(make_plan(q, strategy="bm25"))["query"] == {"match_none": {}}
        roundtrips(body)
    # all-stop-word text stays text (the analyzer drops it: zero_terms_query none -> no match)
    assert make_plan("what is the", strategy="bm25").text == "the"
    assert make_plan("How do they?", strategy="bm25").text == "How do they?"  # only question words: kept


def test_lucene_syntax_and_quotes_stay_plain_match_text():
    q = 'title:(a OR b)~2 "quoted" back\\slash AND NOT *'
    body = build_body(make_plan(q, strategy="bm25"))
    assert body["query"]["multi_match"]["query"] == q
    assert "query_string" not in json.dumps(body)


def test_clean_question_limits_and_surrogates():
    cleaned, text = clean_question("a\ud800b\x00c\n\td")
    assert cleaned == "a b c d" == text
    long = "word " * 5000
    cleaned, text = clean_question(long)
    assert cleaned == text == long.strip()  # the text query is bounded by the plan (bound_text)
    for question in (long, "漢" * 10_000, "a漢b " * 3000):
        plan = make_plan(question, strategy="expanded")
        fields = len(plan.field_boosts)
        assert term_count(plan.text) * fields <= MAX_CLAUSES and plan.text
        assert plan.question == " ".join(question.split()) and "the text query keeps" in plan.notes[0]
    assert make_plan("How do they train the tagger?").notes == ()


def test_search_types_chosen_from_question():
    assert make_plan("Which surveys review dialogue systems?").search_type == "survey"
    assert make_plan("How do they train it?").search_type == "section"
    assert make_plan("transformer attention").search_type == "keyword"
    assert (
        make_plan("transformer attention heads pruning for low resource translation").search_type
        == "balanced"
    )
    assert make_plan("x", search_type="balanced").field_boosts == {
        "title": 2.0,
        "abstract": 2.0,
        "chunk_text": 1.5,
    }
    assert make_plan("Which surveys review it?").field_boosts == {
        "title": 4.0,
        "abstract": 2.5,
        "chunk_text": 1.0,
    }


def test_section_multipliers_follow_intent_rule():
    mults = {
        q: make_plan(q, strategy="sections").section_multipliers
        for q in (
            "What method is used?",
            "How is it trained?",
            "What evaluation benchmarks are used?",
            "Which survey covers NER?",
            "Why is it hard?",
        )
    }
    assert list(mults.values()) == [
        {"method": 1.04},
        {"method": 1.05, "experiments": 1.025},
        {"results": 1.05, "experiments": 1.04},
        {"abstract": 1.04, "introduction": 1.025, "related_work": 1.015},
        {"introduction": 1.04, "related_work": 1.04, "abstract": 1.025},
    ]
    assert make_plan("How is it trained?", strategy="hybrid").section_multipliers == {}


def test_expansion_by_profile_flag():
    assert make_plan("LLM training", strategy="hybrid").expansions == ()
    assert make_plan(
        "LLM training", strategy="hybrid", profile=DEFAULT_PROFILE.with_changes(expansion=True)
    ).expansions == ("large language model",)
    assert (
        make_plan(
            "LLM training", strategy="dense", profile=DEFAULT_PROFILE.with_changes(expansion=True)
        ).expansions
        == ()
    )


def test_paper_cap_zero_disables_collapse_and_client_side_strategies_fetch_more():
    body = build_body(
        make_plan(Q, strategy="hybrid", profile=DEFAULT_PROFILE.with_changes(per_paper_cap=0)), VEC
    )
    assert "collapse" not in body and body["size"] == 10
    plan = make_plan(Q, strategy="rrf", size=30)
    assert plan.fetch_size == 150 and plan.rank_window_size == 150
    assert build_body(plan, VEC)["retriever"]["rrf"]["retrievers"][1]["knn"]["k"] == 150
    assert make_plan(Q, size=80).knn_k == 80  # k never below the hits asked for


def test_filters_validation():
    with pytest.raises(ConfigError, match="unknown section type 'methods'.*'method'"):
        Filters.parse({"section_types": ["methods"]})
    with pytest.raises(ConfigError, match="unknown filter 'author'"):
        Filters.parse({"author": "x"})
    with pytest.raises(ConfigError, match="year range 2020-2010 is empty"):
        Filters.parse({"year_from": 2020, "year_to": 2010})
    f = Filters.parse({"paper_ids": "p1", "section_types": ["method"]})
    body = build_body(make_plan("x", strategy="bm25", filters=f))
    assert body["query"]["bool"]["filter"] == [
        {"terms": {"paper_id": ["p1"]}},
        {"terms": {"section_type": ["method"]}},
    ]


def test_bad_options():
    with pytest.raises(
        ConfigError,
        match="unknown strategy 'bm52'; valid strategies: 'adapted-dense', 'adapted-hybrid', 'bm25', 'dense'",
    ):
        make_plan("x", strategy="bm52")
    with pytest.raises(ConfigError, match="size must be an integer"):
        make_plan("x", size=0)
    with pytest.raises(ConfigError, match="needs a query vector"):
        build_search(make_plan("x", strategy="hybrid"))
    with pytest.raises(ConfigError, match="all zeros"):
        as_query_vector([0.0, 0.0])
    with pytest.raises(ConfigError, match="NaN"):
        as_query_vector([float("nan"), 1.0])
    assert issubclass(ModelMismatchError, ConfigError)


# --- profiles ---------------------------------------------------------------------------------
def test_profile_defaults_match_the_issue():
    p = DEFAULT_PROFILE
    assert p.name == "default" and p.per_paper_cap == 5
    assert p.field_boosts == {
        "keyword": {"title": 3.0, "abstract": 2.0, "chunk_text": 1.0},
        "section": {"chunk_text": 2.0, "abstract": 1.5, "title": 1.0},
        "survey": {"title": 4.0, "abstract": 2.5, "chunk_text": 1.0},
        "balanced": {"title": 2.0, "abstract": 2.0, "chunk_text": 1.5},
    }


def test_profile_json_roundtrip_and_partial_files(tmp_path):
    p = DEFAULT_PROFILE.with_changes(
        name="strong", section_multipliers={"how": {"method": 1.2}}, saturation_k=5
    )
    f = tmp_path / "p.json"
    p.save(f)
    assert load_profile(str(f)) == p
    assert p.section_multipliers["evaluation"] == {
        "results": 1.05,
        "experiments": 1.04,
    }  # untouched rules kept
    f.write_text(json.dumps({"name": "tiny", "knn_weight": 0.5}))
    q = load_profile(f)
    assert q.knn_weight == 0.5 and q.field_boosts == DEFAULT_PROFILE.field_boosts
    assert load_profile(None) is DEFAULT_PROFILE and load_profile("default") is DEFAULT_PROFILE


@pytest.mark.parametrize(
    "data, message",
    [
        (
            {"section_multipliers": {"how": {"methods": 1.1}}},
            "unknown section type 'methods'; valid section types: 'abstract', 'background', 'conclusion'",
        ),
        (
            {"section_multipliers": {"when": {"method": 1.1}}},
            "unknown intent rule 'when'; valid rules: 'default'",
        ),
        (
            {"field_boosts": {"keyword": {"body": 2}}},
            "unknown field 'body'; valid fields: 'abstract', 'chunk_text'",
        ),
        ({"field_boosts": {"fuzzy": {"title": 2}}}, "unknown search type 'fuzzy'"),
        (
            {"search_type": "semantic"},
            "search_type 'semantic' is not valid; valid search types: 'auto', 'balanced'",
        ),
        ({"knn_k": 500}, "num_candidates 100 is less than knn_k 500"),
        ({"tie_breaker": 2}, "tie_breaker = 2"),
        ({"bm25_weight": "heavy"}, "bm25_weight = 'heavy'"),
        ({"colour": "red"}, "unknown profile key 'colour'; valid keys:"),
    ],
)
def test_profile_validation_errors(tmp_path, data, message):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        load_profile(f)
    assert message in str(e.value) and str(f) in str(e.value)


def test_profile_errors_from_constructor_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="unknown section type 'intro'"):
        Profile(section_multipliers={"default": {"intro": 1.1}})
    with pytest.raises(
        ConfigError, match="neither a file nor a profile name; names: 'default', 'tuned-qasper'"
    ):
        load_profile(str(tmp_path / "missing.json"))


# --- rendering --------------------------------------------------------------------------------
def test_console_text_is_request_line_plus_body():
    s = build_search(plan_for("hybrid"), VEC)
    text = to_console(s)
    head, body = text.split("\n", 1)
    assert head == "GET chunks/_search"
    assert json.loads(body) == s.to_dict()
    assert "\n\n" not in text.strip()  # a blank line would end the request in the console
    assert '"query_vector": [0.5, -0.25, 0.125, 1.0]' in text  # vectors stay on one line
    assert json.loads(to_json(s)) == s.to_dict()


def test_console_text_for_rrf_client_is_one_msearch():
    pair = build_search(plan_for("rrf-client"), VEC)
    lines = to_console(pair).strip().split("\n")
    assert lines[0] == "GET chunks/_msearch" and len(lines) == 5
    assert [json.loads(x) for x in lines[1:]] == [{}, pair[0].to_dict(), {}, pair[1].to_dict()]


def fill(source: str, params: dict) -> dict:
    """What Elasticsearch's mustache does with this template's three variables."""
    text = json.dumps(params["query_text"], ensure_ascii=False)[1:-1]  # JSON-escaped, as JsonEscapeEncoder
    out = source.replace("{{#toJson}}query_vector{{/toJson}}", json.dumps(params["query_vector"]))
    return json.loads(out.replace("{{size}}", str(params["size"])).replace("{{query_text}}", text))


@pytest.mark.parametrize("strategy", ["bm25", "dense", "hybrid", "sections", "rrf", "linear"])
def test_template_renders_to_the_same_body(strategy):
    question = 'How do "they" train\\ it? title:(a OR b)~2'
    plan = make_plan(question, strategy=strategy, filters={"year_from": 2019})
    script = template_script(plan)
    assert script["script"]["lang"] == "mustache" and isinstance(script["script"]["source"], str)
    src = script["script"]["source"]
    assert ("{{#toJson}}query_vector{{/toJson}}" in src) == STRATEGIES[strategy].uses_vector
    assert ('"{{query_text}}"' in src) == STRATEGIES[strategy].uses_text
    assert '"size": {{size}}' in src
    rendered = fill(src, {"query_text": plan.text, "query_vector": VEC, "size": plan.fetch_size})
    assert rendered == build_body(plan, VEC)
    roundtrips(rendered)


def test_template_console_text():
    plan = make_plan("How do they train it?", strategy="sections")
    text = to_template(plan, VEC)
    assert template_id(plan) == "scholar-es-sections-section-how"
    assert "PUT _scripts/scholar-es-sections-section-how\n" in text
    assert '"source": """' in text and "POST chunks/_search/template" in text
    assert "\n\n" not in text.split("POST")[0].split("PUT", 1)[1].strip()
    pair = template_script(make_plan("x", strategy="rrf-client"))
    assert isinstance(pair, list) and len(pair) == 2


def test_dumps_inline_lists():
    assert (
        dumps({"a": [1, 2], "b": [{"c": "é"}]})
        == '{\n  "a": [1, 2],\n  "b": [\n    {\n      "c": "é"\n    }\n  ]\n}'
    )


# --- fusion and explanations -----------------------------------------------------------------
def test_rrf_fuse_cormack_k60():
    fused = dict(rrf_fuse([["a", "b", "c"], ["b", "d"]]))
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["a"] == pytest.approx(1 / 61) and fused["d"] == pytest.approx(1 / 62)
    assert [d for d, _ in rrf_fuse([["a", "b", "c"], ["b", "d"]])] == ["b", "a", "d", "c"]
    assert rrf_fuse([["x", "x"]]) == [("x", 1 / 61)]
    assert rrf_fuse([]) == []
    with pytest.raises(ConfigError):
        rrf_fuse([["a"]], k=0)


def test_parse_elasticsearch_style_explanation():
    # the shape Elasticsearch gives for the sections strategy (function_score > bool > script_score + knn)
    expl = {
        "value": 1.32,
        "description": "function score, product of:",
        "details": [
            {
                "value": 1.2,
                "description": "sum of:",
                "details": [
                    {
                        "value": 0.5,
                        "description": 'script score function, computed with script:"..."',
                        "details": [
                            {
                                "value": 10.0,
                                "description": "_score: ",
                                "details": [
                                    {
                                        "value": 10.0,
                                        "description": "max plus 0.3 times others of:",
                                        "details": [
                                            {
                                                "value": 7.0,
                                                "description": "weight(chunk_text:train in 3) [PerFieldSimilarity], "
                                                "result of:",
                                                "details": [],
                                            },
                                            {
                                                "value": 3.0,
                                                "description": "weight(chunk_text:model in 3) [PerFieldSimilarity], "
                                                "result of:",
                                                "details": [],
                                            },
                                            {
                                                "value": 2.0,
                                                "description": "weight(title:train in 3) [PerFieldSimilarity], result of:",
                                                "details": [],
                                            },
                                        ],
                                    }
                                ],
                            }
                        ],
                    },
                    {"value": 0.7, "description": "within top k documents", "details": []},
                ],
            },
            {
                "value": 1.1,
                "description": "min of:",
                "details": [
                    {"value": 1.1, "description": "function score, score mode [max]", "details": []},
                    {"value": 3.4e38, "description": "maxBoost", "details": []},
                ],
            },
        ],
    }
    parts = parse_explanation(expl)
    assert parts.bm25 == {"chunk_text": 10.0, "title": 2.0}
    assert (parts.text, parts.knn, parts.section_multiplier, parts.total) == (0.5, 0.7, 1.1, 1.32)


# --- bad input: 10,000 random strings build valid, round-tripping bodies ----------------------
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789",
    " :()[]{}~^*?\\\"'+-!&|/<>=,.;#@$%`",  # Lucene / JSON syntax
    "漢字仮名交じり文한국어中文",  # CJK
    "🙂🚀👩‍🔬🇫🇷✨",  # emoji, ZWJ sequences, flags
    "\x00\x01\x07\x1b\x7f\u200b\u2028\u2029\ufeff\t\n\r",  # control and format characters
    "αβγδεζηθ абвгд עברית العربية हिन्दी",  # other scripts
]
WORDS = [
    "LLM",
    "RAG",
    "how",
    "what",
    "which",
    "evaluation",
    "benchmarks",
    "train",
    "survey",
    "AND",
    "OR",
    "NOT",
    "title:(a OR b)~2",
    '"exact phrase"',
    "the",
    "of",
]


def random_question(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return ""
    if kind < 0.08:  # very long
        return "".join(rng.choices(rng.choice(ALPHABETS), k=rng.choice([2_000, 10_000])))
    if kind < 0.10:  # lone surrogates and arbitrary code points
        return "".join(chr(rng.randrange(0, 0x110000)) for _ in range(rng.randrange(1, 40)))
    parts = []
    for _ in range(rng.randrange(1, 12)):
        if rng.random() < 0.4:
            parts.append(rng.choice(WORDS))
        else:
            alphabet = rng.choice(ALPHABETS)
            parts.append("".join(rng.choices(alphabet, k=rng.randrange(1, 12))))
    return rng.choice([" ", "", "\n", "  "]).join(parts)


def random_questions(n: int = 10_000, seed: int = 20240604) -> list[str]:
    rng = random.Random(seed)
    return [random_question(rng) for _ in range(n)]


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_10000_random_strings_build_valid_bodies():
    strategies = list(STRATEGIES)
    for i, q in enumerate(random_questions()):
        plan = make_plan(
            q, strategy=strategies[i % len(strategies)], filters={"year_from": 2000} if i % 3 else None
        )
        body = build_body(plan, VEC)
        text = json.dumps(body, ensure_ascii=False)
        text.encode("utf-8")  # no lone surrogates left
        assert "query_string" not in text
        assert term_count(plan.text) * len(plan.field_boosts) <= MAX_CLAUSES
        roundtrips(body)
