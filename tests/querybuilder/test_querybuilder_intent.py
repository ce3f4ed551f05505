import json

import pytest

from querybuilder.expansion import expand, load_synonyms
from querybuilder.intent import RULES, analyze, choose_rule, load_intents, words
from querybuilder.profiles import DEFAULT_PROFILE
from scholar_es.errors import ConfigError


@pytest.mark.parametrize(
    "question, form, rule",
    [
        # the study's rules
        ("What method do they use to align the embeddings?", "what", "what_method"),
        ("What architecture is proposed?", "what", "what_method"),
        ("How do they train the tagger?", "how", "how"),
        ("how is the attention computed", "how", "how"),
        ("Which surveys cover neural machine translation?", "which", "which_overview"),
        ("Which papers review the state-of-the-art in NER?", "which", "which_overview"),
        ("What is the main contribution?", "what", "default"),
        ("Why does the model fail on long sentences?", "why", "default"),
        ("transformer attention heads", "other", "default"),
        # evaluation terms win whatever the form -- including the "What evaluation benchmarks" case
        ("What evaluation benchmarks are used?", "what", "evaluation"),
        ("What benchmarks do they evaluate on?", "what", "evaluation"),
        ("How is the system evaluated?", "how", "evaluation"),
        ("Which datasets are used?", "which", "evaluation"),
        ("What metrics do they report?", "what", "evaluation"),
        ("Does it outperform the baselines?", "other", "evaluation"),
        ("What is the accuracy of the model compared to BERT?", "what", "evaluation"),
        # quantity questions (issue 27): their evidence is in results paragraphs (docs/evaluation.md)
        ("How many attention layers are there in their model?", "how", "evaluation"),
        ("how much data do they train on", "how", "evaluation"),
        ("By how much did the results improve?", "how", "evaluation"),
        ("How are many layers stacked?", "how", "how"),  # not "how many" in a row
        # form words found in the first three words only
        ("In which corpora was it annotated?", "which", "evaluation"),
        ("So how do they encode the input?", "how", "how"),
        ("Is it known what method works?", "other", "default"),
        # Which without overview terms, What without method terms
        ("Which languages are covered?", "which", "default"),
        ("What's the approach?", "what", "what_method"),
        # bad input never raises
        ("", "other", "default"),
        ("title:(a OR b)~2", "other", "default"),
        ('🙂🙂 \\" \x00', "other", "default"),
    ],
)
def test_intent_rules_table(question, form, rule):
    intent = analyze(question)
    assert (intent.form, intent.rule) == (form, rule)


def test_intent_terms_and_survey_flag():
    intent = analyze("Which surveys review LLM training methods?")
    assert intent.intents == {"method", "overview"}
    assert intent.survey
    assert "survey*" in intent.terms["overview"]
    assert not analyze("How do they train it?").survey


def test_choose_rule_covers_every_rule_and_profile_has_each():
    seen = {
        choose_rule(f, s)
        for f in ("what", "how", "which", "why", "other")
        for s in ({"evaluation"}, {"method"}, {"overview"}, set())
    }
    assert seen == set(RULES)
    assert set(DEFAULT_PROFILE.section_multipliers) == set(RULES)


def test_analyze_is_deterministic_and_pure():
    q = "How do they evaluate RAG pipelines?"
    assert analyze(q) == analyze(q)
    assert analyze(q).rule == "evaluation"


def test_user_intents_file_extends_builtin(tmp_path):
    f = tmp_path / "intents.json"
    f.write_text(
        json.dumps({"intents": {"evaluation": ["leaderboard*"]}, "question_forms": {"how": ["howto"]}})
    )
    terms = load_intents(f)
    assert analyze("Which leaderboards list it?", terms).rule == "evaluation"
    assert analyze("Which leaderboards list it?").rule == "default"
    assert analyze("howto train the model", terms).form == "how"
    assert "evaluat*" in [t.text for t in terms.intents["evaluation"]]  # built-ins kept


@pytest.mark.parametrize(
    "content, message",
    [
        (
            {"intents": {"novelty": ["new"]}},
            "unknown intent 'novelty'; valid intents: 'evaluation', 'method', 'overview'",
        ),
        ({"question_forms": {"when": ["when"]}}, "unknown question form 'when'"),
        ({"intents": {"method": [""]}}, "non-empty strings"),
        ({"form_window": 0}, "form_window must be a positive integer"),
        ({"colour": 1}, "unknown key 'colour'"),
    ],
)
def test_user_intents_file_errors(tmp_path, content, message):
    f = tmp_path / "intents.json"
    f.write_text(json.dumps(content))
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_intents(f)


def test_intents_file_missing_or_invalid(tmp_path):
    with pytest.raises(ConfigError, match="cannot read intents file"):
        load_intents(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_intents(bad)


def test_words_normalizes():
    assert words("State-of-the-Art LLMs, ﬁne-tuned") == ["state", "of", "the", "art", "llms", "fine", "tuned"]


@pytest.mark.parametrize(
    "question, expected",
    [
        ("How do LLMs answer questions?", ("large language model",)),
        ("retrieval-augmented generation for QA", ("rag", "question answering")),
        ("What is RAG?", ("retrieval augmented generation",)),
        # "machine translation" is inside "neural machine translation": both groups expand
        (
            "neural machine translation with BERT",
            ("mt", "nmt", "bidirectional encoder representations from transformers"),
        ),
        ("nothing to expand here", ()),
        ("", ()),
        ("re-ranking", ()),
    ],
)
def test_expansion(question, expected):
    assert expand(question) == expected


def test_expansion_limit_and_user_file(tmp_path):
    assert len(expand("LLM RAG NER QA MT NLP CNN")) == 4
    f = tmp_path / "syn.json"
    f.write_text(json.dumps({"groups": [["sbert", "sentence bert"]]}))
    assert expand("SBERT embeddings", load_synonyms(f)) == ("sentence bert",)
    f.write_text(json.dumps({"groups": [["lonely"]]}))
    with pytest.raises(ConfigError, match="at least two spellings"):
        load_synonyms(f)
