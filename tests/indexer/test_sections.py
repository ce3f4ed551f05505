import json

import pytest

from indexer.sections import (
    DEFAULT_RULES_PATH,
    clean_heading,
    load_rules,
    match_heading,
    normalize_heading,
    section_types,
)
from scholar_es.errors import ConfigError


@pytest.mark.parametrize(
    "heading, expected",
    [
        # numbering and case
        ("Introduction", "introduction"),
        ("1 Introduction", "introduction"),
        ("I. INTRODUCTION", "introduction"),
        ("3.2 Model Architecture", "method"),
        ("IV. RESULTS", "results"),
        ("5) Results", "results"),
        ("Section 6: Conclusion", "conclusion"),
        ("A.1", "other"),
        ("A. Analysis on Relation Patterns", "discussion"),
        ("A Simple Baseline", "experiments"),  # the article "A" is not numbering
        # compound and common headings
        ("Related Work and Background", "related_work"),
        ("Background", "background"),
        ("Problem Formulation", "background"),
        ("Preliminary Results and Discussion", "results"),
        ("Experimental Setup", "experiments"),
        ("Datasets", "experiments"),
        ("Implementation Details", "experiments"),
        ("Experimental Results", "results"),
        ("Results and Discussion", "results"),
        ("Ablation Study", "results"),
        ("Comparison with Existing Approaches", "results"),
        ("Error Analysis", "discussion"),
        ("Discussion", "discussion"),
        ("Conclusion and Future Work", "conclusion"),
        ("Discussion and Conclusion", "conclusion"),
        ("Concluding Remarks", "conclusion"),
        ("Limitations", "limitations"),
        ("Proposed Method", "method"),
        ("Data Collection", "method"),
        ("Training Objective", "method"),  # an ML objective, not the study's objective
        ("Acknowledgments", "other"),
        ("References", "other"),
        ("Appendix", "other"),
        ("Sentiment Analysis", "other"),  # a topic, not an analysis section
        ("Introduction to Transformers", "other"),
        ("", "other"),
        # QASPER paths: the deepest informative part decides ...
        ("Experiments ::: Datasets", "experiments"),
        ("Experiments ::: Results", "results"),
        ("Model ::: Encoder", "method"),
        ("Experiments ::: Overview", "experiments"),
        ("Appendix ::: Hyperparameters", "experiments"),
        (" :::  ::: ", "other"),
        # ... except inside containers, where only a nested container is more precise
        ("Related Work ::: Neural Models", "related_work"),
        ("Background ::: Recurrent Language Models", "background"),
        ("Introduction ::: Related Work", "related_work"),
        ("Conclusion ::: Limitations", "limitations"),
        # PubMedQA structured-abstract labels
        ("BACKGROUND", "background"),
        ("OBJECTIVE", "introduction"),
        ("OBJECTIVES", "introduction"),
        ("PURPOSE", "introduction"),
        ("AIMS", "introduction"),
        ("BACKGROUND AND PURPOSE", "background"),
        ("METHODS", "method"),
        ("MATERIALS AND METHODS", "method"),
        ("DESIGN", "method"),
        ("SETTING", "method"),
        ("PATIENTS", "method"),
        ("MAIN OUTCOME MEASURES", "method"),
        ("RESULTS", "results"),
        ("MEASUREMENTS AND MAIN RESULTS", "results"),
        ("CONCLUSIONS", "conclusion"),
        ("SUMMARY OF BACKGROUND DATA", "background"),
        ("LIMITATIONS", "limitations"),
        ("UNLABELLED", "other"),
    ],
)
def test_normalize_heading(heading, expected):
    assert normalize_heading(heading) == expected


def test_clean_heading_removes_numbering_and_noise():
    assert clean_heading("  3.2.1   Model &  Training: ") == "model and training"
    assert clean_heading("IV. RESULTS") == "results"
    assert clean_heading("A Model") == "a model"


def test_match_heading_tells_unknown_from_other_on_purpose():
    assert match_heading("Embedding Trees in Euclidean Space") is None
    assert match_heading("Acknowledgements") == "other"
    assert match_heading(None) is None


def test_unknown_headings_take_the_type_of_agreeing_neighbours():
    headings = [
        "Introduction",
        "Model",
        "Tree Kernels",
        "Training",
        "Evaluation",
        "Probing Syntax",
        "Conclusion",
        "Worked Examples",
    ]
    assert section_types(headings) == [
        "introduction",
        "method",
        "method",
        "method",
        "experiments",
        "other",  # neighbours disagree (experiments / conclusion)
        "conclusion",
        "other",
    ]


def test_other_on_purpose_is_never_filled_and_given_types_count_as_neighbours():
    assert section_types(["Model", "Acknowledgments", "Training"]) == ["method", "other", "method"]
    assert section_types(["Setup", "Tree Kernels", "Zoo"], ["experiments", None, "experiments"]) == [
        "experiments",
        "experiments",
        "experiments",
    ]


def test_default_rules_are_loaded_once():
    assert load_rules() is load_rules()
    assert load_rules().source == str(DEFAULT_RULES_PATH)


def test_users_can_extend_the_rules(tmp_path):
    data = json.loads(DEFAULT_RULES_PATH.read_text(encoding="utf-8"))
    data["rules"].insert(0, {"type": "method", "patterns": ["^tree kernels$"]})
    path = tmp_path / "sections.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    rules = load_rules(path)
    assert normalize_heading("4 Tree Kernels", rules) == "method"
    assert normalize_heading("4 Tree Kernels") == "other"


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"rules": [{"type": "methods", "patterns": ["x"]}]}', "'methods'"),
        ('{"rules": [{"type": "method", "patterns": ["(unclosed"]}]}', "'(unclosed'"),
        ('{"rules": "x"}', "'rules' list"),
        ('{"rules": [], "fill_between": ["nope"]}', "'nope'"),
        ("not json", "not valid JSON"),
    ],
)
def test_bad_rules_files_raise_config_error(tmp_path, content, expected):
    path = tmp_path / "rules.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    assert expected in str(info.value) and str(path) in str(info.value)
    if "methods" in content:
        assert "'method'" in str(info.value)  # the valid choices are listed


def test_missing_rules_file_raises_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read section rules file"):
        load_rules(tmp_path / "absent.json")
