"""Multi-section search, stage 1: preprocessing and breakdown (offline, LLM, LLM failures). No engine."""

import json
import time

import pytest

from scholar_es.errors import ConfigError
from scholar_es.multisection.decompose import (
    Breakdown,
    breakdown,
    build_prompt,
    keyword_query,
    load_prompts,
    offline_breakdown,
    parse_llm_output,
    preprocess,
    survey_section,
)

CONTEXT_Q = (
    "How do LLMs handle context length limits when reading long documents or reasoning over many steps?"
)


def titles(b: Breakdown) -> list[str]:
    return [s.title for s in b.sections]


def test_offline_example_question():
    b = offline_breakdown(CONTEXT_Q)
    assert b.source == "offline"
    assert titles(b) == [
        "Overview of context length limits in LLMs",
        "Methods for reading long documents",
        "Methods for reasoning over many steps",
    ]
    assert [s.kind for s in b.sections] == ["overview", "facet", "facet"]
    assert b.keywords == "LLMs context length limits reading long documents reasoning many steps"
    assert offline_breakdown(CONTEXT_Q) == b  # deterministic


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Which models perform best on SQuAD, TriviaQA and Natural Questions?",
            [
                "Models perform best on SQuAD",
                "Models perform best on TriviaQA",
                "Models perform best on Natural Questions",
            ],
        ),
        (
            "Which datasets and metrics are used to evaluate summarization of scientific articles?",
            [
                "Datasets used to evaluate summarization of scientific articles",
                "Metrics used to evaluate summarization of scientific articles",
            ],
        ),
        (
            "How do LLMs handle long documents and multi-step reasoning?",
            ["Methods for long documents in LLMs", "Methods for multi-step reasoning in LLMs"],
        ),
        (
            "How are transformers applied to vision tasks such as detection, segmentation and tracking?",
            [
                "Overview of transformers applied to vision tasks",
                "Methods for detection",
                "Methods for segmentation",
                "Methods for tracking",
            ],
        ),
    ],
)
def test_offline_lists_and_conditions(question, expected):
    assert titles(offline_breakdown(question)) == expected


def test_offline_condition_with_evaluation_terms_adds_a_benchmark_facet():
    b = offline_breakdown(
        "How do summarization models perform when articles are long or scientific, and which metrics apply?"
    )
    assert 1 <= len(b.sections) <= 5
    b = offline_breakdown("How is argument mining evaluated when the data is noisy or small?")
    assert titles(b)[0].startswith("Overview of")
    assert "evaluation" in [s.kind for s in b.sections] or any("valuat" in t for t in titles(b))


def test_offline_survey_question_gets_a_survey_facet():
    b = offline_breakdown(
        "What are recent trends in dialogue data collection, question paraphrasing and interactive learning?"
    )
    assert b.sections[0].kind == "survey"
    assert (
        b.sections[0].title
        == "Survey of dialogue data collection, question paraphrasing and interactive learning"
    )
    assert [s.title for s in b.sections[1:]] == [
        "Recent trends in dialogue data collection",
        "Recent trends in question paraphrasing",
        "Recent trends in interactive learning",
    ]
    assert (
        survey_section("Give me a survey of retrieval-augmented generation").title
        == "Survey of retrieval-augmented generation"
    )
    assert (
        survey_section("What is the state of the art in argument mining?").title
        == "Survey of argument mining"
    )
    assert survey_section(CONTEXT_Q) is None


def test_offline_several_questions_in_one():
    b = offline_breakdown("What are the main approaches to argument mining and how are they evaluated?")
    assert [s.kind for s in b.sections] == ["survey", "facet", "facet"]
    assert titles(b)[1:] == [
        "Main approaches to argument mining",
        "Main approaches to argument mining evaluated",
    ]


@pytest.mark.parametrize(
    "question",
    [
        "What is BERT?",
        "How do they train the LLM?",
        "What are the differences between BERT and GPT?",
        "What discourse relations does it work best/worst for?",
    ],
)
def test_offline_single_facet_question_is_its_own_section(question):
    b = offline_breakdown(question)
    assert titles(b) == [question]
    assert b.sections[0].kind == "question"
    assert "only facet" in b.note


@pytest.mark.parametrize("question", ["", "???", "and or, and?", "   \x00  "])
def test_question_that_decomposes_into_nothing_is_one_section(question):
    b = breakdown(question)
    assert len(b.sections) == 1 and b.sections[0].kind == "question"


def test_at_most_five_sections_and_no_duplicates():
    q = "How do models handle tables when reading papers, reports, slides, forms, emails, logs or code?"
    b = offline_breakdown(q)
    assert 1 <= len(b.sections) <= 5
    assert len({t.casefold() for t in titles(b)}) == len(b.sections)


def test_preprocess_drops_fillers_and_keeps_acronyms():
    cleaned, rewritten, keywords = preprocess(
        "Can you tell me how  prior knowledge is used in text classification?"
    )
    assert cleaned == "Can you tell me how prior knowledge is used in text classification?"
    assert rewritten == "How prior knowledge is used in text classification?"
    assert keywords == "prior knowledge used text classification"
    assert keyword_query("What is the BERT model of the BERT paper?") == "BERT model paper"


# --- the LLM decomposer -----------------------------------------------------------------------------
def test_llm_breakdown_used_and_prompt_holds_the_question():
    prompts = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return json.dumps(
            {
                "rewritten": "How do LLMs cope with long inputs?",
                "keywords": "LLM long context",
                "sections": [
                    "Overview of context limits",
                    "Long-document methods",
                    "Multi-step reasoning methods",
                    "Benchmarks for context extension",
                ],
            }
        )

    b = breakdown(CONTEXT_Q, llm)
    assert b.source == "llm" and b.note == ""
    assert titles(b) == [
        "Overview of context limits",
        "Long-document methods",
        "Multi-step reasoning methods",
        "Benchmarks for context extension",
    ]
    assert (b.rewritten, b.keywords) == ("How do LLMs cope with long inputs?", "LLM long context")
    assert len(prompts) == 1 and CONTEXT_Q in prompts[0] and prompts[0] == build_prompt(CONTEXT_Q)


@pytest.mark.parametrize(
    "answer",
    [
        'Sure! ```json\n{"sections": ["A topic", {"title": "B topic"}]}\n```',
        'Here: {"sections": ["A topic", "B topic"]} hope this helps',
        '["A topic", "B topic"]',
        "Sections:\n- A topic\n2. B topic\n",
    ],
)
def test_llm_answer_formats(answer):
    b = breakdown(CONTEXT_Q, lambda p: answer)
    assert b.source == "llm"
    assert titles(b) == ["A topic", "B topic"]
    assert b.keywords == offline_breakdown(CONTEXT_Q).keywords  # not given: the offline keyword query


def test_llm_sections_are_capped_and_deduplicated():
    answer = json.dumps(
        {"sections": ["One", "one", "Two", "  ", "???", "Three", "Four", "Five", "Six", "Seven"]}
    )
    b = breakdown(CONTEXT_Q, lambda p: answer)
    assert titles(b) == ["One", "Two", "Three", "Four", "Five"]


def _raises(prompt):
    raise RuntimeError("model server unavailable")


@pytest.mark.parametrize(
    ("llm", "reason"),
    [
        (_raises, "RuntimeError: model server unavailable"),
        (lambda p: "I cannot help with that.", "no JSON object"),
        (lambda p: json.dumps({"sections": []}), "no section title"),
        (lambda p: json.dumps({"sections": ["!!!", "..."]}), "no section title"),
        (lambda p: None, "no JSON object"),
    ],
)
def test_llm_failure_falls_back_to_offline(llm, reason):
    b = breakdown(CONTEXT_Q, llm)
    assert b.source == "fallback"
    assert reason in b.note
    assert b.sections == offline_breakdown(CONTEXT_Q).sections


def test_llm_timeout_falls_back_quickly():
    def slow(prompt):
        time.sleep(3)
        return '{"sections": ["late"]}'

    start = time.perf_counter()
    b = breakdown(CONTEXT_Q, slow, timeout=0.2)
    assert time.perf_counter() - start < 2
    assert b.source == "fallback" and "did not answer within 0.2 s" in b.note
    assert titles(b) == titles(offline_breakdown(CONTEXT_Q))


def test_parse_llm_output_rejects_non_text():
    assert parse_llm_output(None) is None
    assert parse_llm_output("") is None
    assert parse_llm_output('{"rewritten": "x"}') is None


def test_llm_must_be_callable():
    with pytest.raises(ConfigError, match="callable"):
        breakdown(CONTEXT_Q, "gpt-4")


def test_prompts_file_override_and_errors(tmp_path):
    custom = tmp_path / "p.json"
    custom.write_text(
        json.dumps(
            {
                "breakdown": "Split: {question}",
                "offline": {
                    "titles": {
                        "overview": "Background on {topic}",
                        "survey": "Reviews of {topic}",
                        "evaluation": "Evaluating {topic}",
                        "facet": {"default": "{item}", "how": "Ways of {item}"},
                    }
                },
            }
        )
    )
    p = load_prompts(custom)
    assert build_prompt("Q?", p) == "Split: Q?"
    assert titles(offline_breakdown(CONTEXT_Q, p))[:2] == [
        "Background on context length limits in LLMs",
        "Ways of reading long documents",
    ]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"breakdown": "no placeholder"}))
    with pytest.raises(ConfigError, match="breakdown"):
        load_prompts(bad)
    bad.write_text(json.dumps({"offline": {"max_sections": 9}}))
    with pytest.raises(ConfigError, match="max_sections"):
        load_prompts(bad)
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_prompts(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_prompts(tmp_path / "missing.json")
