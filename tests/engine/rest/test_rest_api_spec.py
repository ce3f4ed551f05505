"""Elasticsearch's YAML REST tests, run against the embedded engine.

The fixtures in ``tests/engine/rest/rest_api/*.yml`` are adapted from ``elastic/elasticsearch``'s
``rest-api-spec`` (and ``x-pack/plugin/rank-rrf``) YAML tests; each file names the source
path and commit it was adapted from. The expected values are the ones Elasticsearch's own
tests assert. The runner follows elasticsearch-py's ``test_rest_api_spec.py``: every test
gets a fresh engine, runs ``setup``, its steps and ``teardown``; ``do`` calls the client API
of that name (``indices.create``, ``bulk``, ``search``...) through the official client, and
``match``/``length``/``is_true``/``is_false``/``exists``/``not_exists``/``gt``/``gte``/``lt``/
``lte``/``close_to``/``contains``/``set`` check the response. ``catch`` expects an error
(``bad_request``, ``missing``, ``request`` or a ``/regex/`` over the error body).

What is left out, and why: ``OMITTED`` (upstream tests not ported, per file), ``SKIP`` (ported
tests skipped here), and tests whose ``skip.features`` / ``requires.test_runner_features`` name a
runner feature outside ``SUPPORTED_FEATURES`` are skipped with that reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from elasticsearch import ApiError

from scholar_es.engine.rest.transport import embedded_client

HERE = Path(__file__).parent / "rest_api"

# (file stem, test name) -> reason. Every entry says what the engine lacks.
SKIP: dict[tuple[str, str], str] = {
    ("search.highlight.10_unified", "Basic combined_fields query"): "the engine has no combined_fields query",
    ("update_by_query.80_scripting", "Update all docs with one deletion and one noop"): "dynamic mapping "
    "does not detect dates: last_updated is text, and the match on a timestamp matches its shared tokens",
    (
        "update_by_query.80_scripting",
        "Update all docs with one deletion and one noop using a stored script",
    ): "same",
}

# Upstream tests not ported, per upstream file (in tests/engine/rest/rest_api/ under the same stem), and why.
OMITTED: dict[str, dict[str, str]] = {
    "search.110_field_collapsing": {
        "field collapsing and from": "skipped upstream for every version (elastic/elasticsearch#52416)",
        "field collapsing and inner_hits": "skipped upstream for every version (elastic/elasticsearch#52416)",
        "no hits and inner_hits": "skipped upstream for every version (elastic/elasticsearch#52416)",
        "field collapsing and search_after": "skipped upstream for every version (elastic/elasticsearch#73316)",
        "field collapsing and search_after with invalid sort": (
            "the message differs between 8.x versions (docs/es-semantics.md, collapse)"
        ),
        "field collapsing and rescore": (
            "before 8.15 an error; 8.15+ rescores the group heads, as the engine does "
            "(112_field_collapsing_with_rescore)"
        ),
        "field collapsing on a field alias": "searches two indices at once, one with an alias field",
    },
    "search.aggregation.20_terms": {
        "IP test": "no ip field type",
        "Partitioned string test": "terms include partitions are refused",
        "Partitioned integer test": "terms include partitions are refused",
        "Mixing longs and doubles": "searches two indices at once (one index per search)",
        "Global ordinals are not loaded with the map execution hint": "asserts fielddata stats",
        "Global ordinals are loaded with the global_ordinals execution hint": "asserts fielddata stats",
    },
    "search.aggregation.10_histogram": {
        "Format test": "DecimalFormat format on histogram keys is refused",
        "histogram with hard bounds": "long_range field type",
        "histogram with offset and unmapped": "searches test_* (several indices)",
        "date_histogram": "date_histogram is refused",
        "date_histogram with offset": "date_histogram is refused",
    },
    "search.aggregation.40_range": {"(ip and date range tests)": "no ip type, date_range is refused"},
    "search.aggregation.170_cardinality_metric": {
        "profiler int": "no profile output",
        "profiler double": "no profile output",
        "profiler string": "no profile output",
    },
    "search.aggregation.220_filters_bucket": {
        "named filters with bucket sort test": "bucket_sort (pipeline) is refused",
        "Only aggs test": "same as Basic test with size 0 (covered in 150_stats_metric)",
        "cache busting": "request cache and split_queries_on_whitespace",
        "nested": "nested mappings",
        "cache hits": "terms lookup and request cache stats",
    },
    "search.aggregation.150_stats_metric": {},
    "search.aggregation.140_value_count_metric": {"Only aggs test": "same requests with size 0"},
    "search.aggregation.110_max_metric": {
        "Only aggs test": "same requests with size 0",
        "Metadata test": "covered by 150_stats_metric and 140_value_count_metric",
    },
    "search.aggregation.200_top_hits_metric": {"(all)": "nested documents"},
    "msearch.10_basic": {
        "Least impact smoke test": "targets index_* (several indices)",
        "(index_* and all-index items)": "one index per search; those items are left out",
    },
    "search.highlight.10_unified": {},
    "search.highlight.70_number_of_fragments": {"(type: plain)": "only the unified highlighter"},
    "search.330_fetch_fields": {
        "Test basic field retrieval": "integer_range field type",
        "Test ignore malformed": "ignore_malformed is not applied at index time by the engine",
        "Test token count": "token_count field type",
        "Test unmapped field": "include_unmapped is refused",
        "Test unmapped fields inside disabled objects": "include_unmapped is refused",
        "(nested field tests)": "nested mappings",
    },
    "search.vectors.150_knn_search_missing_params": {},
    "search.vectors.160_knn_query_missing_params": {
        "kNN search used in nested field - missing num_candidates": "nested mappings",
    },
    "search.vectors.40_knn_search": {
        "kNN search in _knn_search endpoint": "the deprecated _knn_search endpoint is not routed",
        "kNN search with filter in _knn_search endpoint": "the deprecated _knn_search endpoint is not routed",
    },
    "search.vectors.140_knn_query_with_other_queries": {},
    "search.vectors.190_knn_query-with-k-param": {},
    "get.70_source_filtering": {},
    # conditional writes (issue 25): every test of these upstream files is ported
    "index.20_optype": {},
    "index.30_cas": {},
    "index.35_external_version": {},
    "index.36_external_gte_version": {},
    "create.10_with_id": {},
    "create.35_external_version": {},
    "delete.10_basic": {},
    "delete.12_result": {},
    "delete.20_cas": {},
    "delete.25_external_version": {},
    "delete.26_external_gte_version": {},
    "bulk.80_cas": {},
    "search.10_source_filtering": {
        "Exclude sparse embeddings from _source by default": "no sparse_vector field type",
        "docvalue_fields with explicit format": "DecimalFormat patterns (#.0) on numeric docvalue_fields "
        "are refused with a 400 naming the format",
    },
    "rrf.320_rrf_weighted_retriever": {},
    "rrf.1000_rrf_retriever_highlighting": {},
    "rrf.700_rrf_retriever_aggs": {
        "rrf retriever with aggs - scripted metric using score": "aggregation scripts are refused",
    },
    "linear.10_linear_retriever": {
        "explain should provide info on weights and inner retrievers": "explain with a retriever is refused "
        "with a 400 naming it (no per-retriever explanation)",
        "linear retriever with custom sort for nested retrievers": "a standard retriever's sort is refused",
    },
    "rrf.800_rrf_retriever_collapse": {
        "rrf retriever with inner-level collapse": "a standard retriever's collapse is refused",
    },
    # scroll, point in time, search_after and _mget (issue 26)
    "scroll.10_basic": {},
    "scroll.11_clear": {},
    "scroll.12_slices": {"(all)": "sliced scroll is refused (slice)"},
    "scroll.20_keep_alive": {
        "Max keep alive": "sets search.max_keep_alive through PUT _cluster/settings, which the engine does "
        "not have; the fixed 24h bound and its message are tested in test_scroll_pit.py",
    },
    "search.350_point_in_time": {
        "wildcard": "opens a point in time over two indices (one index per search)",
        "msearch": "opens a point in time over two indices (one index per search)",
    },
    "search.351_point_in_time_slice": {"(all)": "slice is refused"},
    "search.90_search_after": {
        "date": "a date field with a custom format (yyyy-MM-dd HH:mm:ss.SSS) in search_after",
        "date_nanos": "no date_nanos field type",
        "Format sort values": "sort `format` and date_nanos, and a search over two indices",
    },
    "mget.10_basic": {},
    "mget.12_non_existent_index": {},
    "mget.13_missing_metadata": {},
    "mget.14_alias_to_multiple_indices": {},
    "mget.15_ids": {},
    "mget.17_default_index": {},
    "mget.20_stored_fields": {"(all)": "stored_fields is refused by name (the engine stores only _source)"},
    "mget.40_routing": {"(all)": "routing is refused by name (one shard)"},
    "mget.60_realtime_refresh": {
        "Realtime Refresh": "expects realtime=false to miss a document indexed with refresh_interval -1; the "
        "engine's searcher has no refresh lag, so it finds it (documented in engine/rest/mget.py)",
    },
    "mget.70_source_filtering": {},
    "mget.80_deprecated": {},
    "mget.90_synthetic_source": {"(all)": "no synthetic _source"},
    "mget.(11,16,18,19,21,22,23,41,61,71,80)_*_with_types": {"(all)": "7.x typed requests"},
    # _update, _delete_by_query, _update_by_query, _reindex (issue 26)
    "update.10_doc": {},
    "update.11_shard_header": {},
    "update.12_result": {},
    "update.13_legacy_doc": {},
    "update.16_noop": {},
    "update.20_doc_upsert": {},
    "update.22_doc_as_upsert": {},
    "update.35_if_seq_no": {},
    "update.60_refresh": {
        "Refresh": "expects an update to stay invisible to search until a refresh (index.refresh_interval "
        "-1); the engine's searches see every acknowledged write",
    },
    "update.80_source_filtering": {},
    "update.90_error": {},
    "update.40_routing": {"(all)": "routing is refused (one shard)"},
    "update.85_fields_meta": {"(all)": "awaits_fix upstream (parent/fields of another era)"},
    "update.95_require_alias": {"(all)": "require_alias is refused"},
    "update.100_synthetic_source": {"(all)": "no synthetic _source"},
    "update.110_seq_no_disabled": {"(all)": "index.mapping.seq_no settings are not implemented"},
    "update.(*_with_types, 90_mix_typeless_typeful)": {"(all)": "mapping types (removed in 8.0)"},
    "delete_by_query.10_basic": {
        "wait_for_completion=false": "no task API: refused by name",
        "Response for version conflict (version powered)": "skipped upstream since 6.7",
        "Response for version conflict (seq no powered)": "provokes the conflict with an update left "
        "unrefreshed (refresh_interval -1); the engine's snapshot sees it: the conflict is tested in "
        "tests/engine/rest/test_engine_update_by_query.py instead",
        "Response for version conflict with conflicts=proceed": "same",
        "Limit by size pre 7.3": "skipped upstream since 7.3",
        "tsdb": "no time_series index mode",
    },
    "delete_by_query.20_validation": {"no body fails": "catch: param (a client-side check)"},
    "delete_by_query.40_versioning": {"(all)": "skipped upstream since 6.7"},
    "delete_by_query.50_wait_for_active_shards": {
        "(all)": "wait_for_active_shards above 1 is refused (one copy)"
    },
    "delete_by_query.70_throttle": {"(all)": "rethrottles through the task API"},
    "delete_by_query.80_slices": {"(all)": "slices above 1 are refused (one shard)"},
    "update_by_query.10_basic": {
        "wait_for_completion=false": "no task API: refused by name",
        "Response for version conflict (version powered)": "skipped upstream since 6.7",
        "Response for version conflict (seq no powered)": "provokes the conflict with an update left "
        "unrefreshed (refresh_interval -1); tested in tests/engine/rest/test_engine_update_by_query.py",
        "Response for version conflict with conflicts=proceed": "same",
        "Limit by size pre 7.3": "skipped upstream since 7.3",
    },
    "update_by_query.20_validation": {
        "invalid size fails": "elasticsearch-py 8 has no size parameter for update_by_query",
        "inconsistent max_docs and size fails": "same (delete_by_query)",
        "inconsistent max_docs in body and max_docs in URL fails": "elasticsearch-py refuses max_docs both "
        "in the URL and in the body",
        "update_by_query without source gives useful error message": "_source.enabled: false is not implemented",
    },
    "update_by_query.80_scripting": {
        "Setting bogus context is an error": "the message before 8.5",
        "Can't change _id": "the message before 8.5",
        "Set unsupported operation type": "the message before 8.5",
    },
    "update_by_query.(30_new_fields, 35_search_failure, 40_versioning, 50_consistency, 60_throttle, "
    "70_slices, 85_script_cancellation, 90_tsdb, 100_synthetic_source)": {
        "(all)": "not ported: new-field mapping refresh, search failures of a broken query, versioning "
        "against external versions, wait_for_active_shards, rethrottling and slices (task API, one shard), "
        "script cancellation, tsdb and synthetic _source"
    },
    "reindex.10_basic": {"wait_for_completion=false": "no task API: refused by name"},
    "reindex.20_validation": {
        "no body fails": "catch: param (a client-side check)",
        "inconsistent max_docs in body and max_docs in URL fails": "elasticsearch-py refuses max_docs both "
        "in the URL and in the body",
        "reindex without source gives useful error message": "_source.enabled: false is not implemented",
        "unwhitelisted remote host fails": "source.remote is refused by name",
        "badly formatted remote host fails": "same",
        "junk in remote fails": "same",
        "broken socket timeout in remote fails": "same",
        "broken connect timeout in remote fails": "same",
    },
    "reindex.85_scripting": {
        "Add routing": "routing is refused (one shard)",
        "Add slice alias": "index.slice settings",
        "Script Write Field": "the field('x') API of Painless is outside the engine's update-script subset",
    },
    "reindex.(25_no_auto_create, 30_search, 35_search_failures, 40_versioning, 50_routing, 51_routing, "
    "52_slice, 60_wait_for_active_shards, 70_throttle, 80_slices, 90_remote, 95_parent_join, "
    "96_script_cancellation, 100_tsdb, 110_synthetic_source, 120_*, 200_get_reindex)": {
        "(all)": "not ported: action.auto_create_index settings, sort/size in the source search, search "
        "failures, routing, slices and throttling through the task API, remote sources, join fields, "
        "script cancellation, tsdb, synthetic _source, the reindex management API"
    },
    # URL parameters, response shaping and _cat (issue 26)
    "search.70_response_filtering": {},
    "cat.count.10_basic": {},
    "cat.health.10_basic": {},
    "cluster.health.20_request_timeout": {
        "cluster health request timeout with 200 response code": "return_200_for_cluster_health_timeout "
        "is not in the 8.15 REST specification"
    },
    "cluster.health.(10_basic, 30_indices_options)": {
        "(all)": "not ported: unassigned_primary_shards (a capability after 8.15), level indices/shards "
        "(refused), closed indices; the waits are tested in tests/engine/rest/test_params26.py"
    },
    "cat.aliases.10_basic": {
        "Help (pre 7.4.0)": "a 7.3 node's answer",
        "Simple alias (pre 7.4.0)": "a 7.3 node's answer",
        "Column headers (pre 7.4.0)": "a 7.3 node's answer",
        "Complex alias": "alias filters and routing are not supported by the engine",
        "Complex alias (pre 7.4.0)": "alias filters and routing are not supported by the engine",
        "Alias against closed index": "the engine has no closed indices",
        "Alias against closed index (pre 7.4.0)": "the engine has no closed indices",
    },
    "cat.indices.10_basic": {
        "Test cat indices output": "store.size, pri.store.size and dataset.size are empty (the engine "
        "keeps no per-index store statistics) and the uuid is 32 hex characters, not 22 of base64",
        "Test cat indices output for closed index (pre 7.2.0)": "the engine has no closed indices",
        "Test cat indices output for closed index": "the engine has no closed indices",
        "Test cat indices sort": "closes an index (the engine has no closed indices)",
    },
    "linear.10_linear_retriever_normalizers": {
        "Linear retriever with top-level L2 normalization": "expects the WIP semantics of that commit "
        "(normalizing the fused scores); PR 129693 as merged (f84ec74) deleted this file and documents "
        "the top-level normalizer as each sub-retriever's default, which the tests ported here assert",
        "Linear retriever with mixed normalization (top-level and per-retriever with same normalizer)": "same",
        "Linear retriever with mismatched normalizers (should fail)": "the merged feature lets a "
        "sub-retriever's normalizer override the top-level one instead of failing",
    },
    "search.60_query_string": {},
    "count.20_query_string": {},
    "explain.30_query_string": {},
    "explain.10_basic": {"Basic explain with alias": "aliases with a filter are refused by the engine"},
    "indices.validate_query.10_basic": {},  # steps left out: see the fixture's header
    "indices.analyze.20_analyze_limit": {
        "_analyze with explain with No. generated tokens more than index.analyze.max_token_count should fail": (
            "_analyze explain is refused by name"
        ),
    },
    # upstream files not ported at all
    "indices.analyze.21_analyze_max_char_count": {
        "(whole file)": "index.analyze.max_char_count is not an Elasticsearch 8.x setting (newer capability)"
    },
    "explain.20_source_filtering": {"(whole file)": "_explain's _source / stored_fields are refused by name"},
    "search.370_profile": {
        "(whole file)": "asserts Lucene's per-method breakdown counts, debug sections, aggregation and "
        "fetch profiles; the engine's profile is an approximate per-node timing (docs/es-semantics.md)"
    },
    "search.200_index_phrase_search": {"(whole file)": "index_phrases on text fields is not implemented"},
    "search.190_index_prefix_search": {"(whole file)": "index_prefixes on text fields is not implemented"},
    "search.310_match_bool_prefix": {"(whole file)": "match_bool_prefix is refused by name"},
}

# Runner features the ported tests may ask for; tests asking for others are skipped.
SUPPORTED_FEATURES = {"allowed_warnings", "warnings", "close_to", "contains", "headers"}

# APIs whose upstream tests send one parameter both in the URL and in the body: (method, path, name)
_URL_AND_BODY = {
    "scroll": ("POST", "/_search/scroll", "scroll_id"),
    "clear_scroll": ("DELETE", "/_search/scroll", "scroll_id"),
}

CATCH_STATUS = {
    "bad_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "missing": 404,
    "request_timeout": 408,
    "conflict": 409,
    "unavailable": 503,
}


def _load(path: Path) -> tuple[list, list, dict[str, list]]:
    setup, teardown, tests = [], [], {}
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        for name, steps in doc.items():
            if name == "setup":
                setup = steps
            elif name == "teardown":
                teardown = steps
            else:
                tests[name] = steps
    return setup, teardown, tests


def _cases():
    for path in sorted(HERE.glob("*.yml")):
        _, _, tests = _load(path)
        for name in tests:
            marks = []
            reason = SKIP.get((path.stem, name))
            if reason:
                marks.append(pytest.mark.skip(reason=reason))
            yield pytest.param(path, name, id=f"{path.stem}::{name}", marks=marks)


class Runner:
    def __init__(self, es) -> None:
        self.es = es
        self.last = None
        self.stash: dict[str, object] = {}

    # --- values ----------------------------------------------------------------------
    def resolve(self, value):
        if isinstance(value, str):
            if value.startswith("$") and value[1:] in self.stash:
                return self.stash[value[1:]]
            return re.sub(r"\$\{(\w+)\}", lambda m: str(self.stash[m[1]]), value)
        if isinstance(value, dict):
            return {self.resolve(k): self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    def lookup(self, path: str):
        if path in ("$body", ""):
            return self.last
        value = self.last
        for part in re.split(r"(?<!\\)\.", path):
            part = self.resolve(part.replace("\\.", "."))
            if isinstance(value, list):
                value = value[int(part)]
            elif isinstance(value, dict):
                if part not in value:
                    return None
                value = value[part]
            else:
                return None
        return value

    # --- steps -------------------------------------------------------------------------
    def run(self, steps: list) -> None:
        for step in steps:
            ((kind, arg),) = step.items()
            getattr(self, "step_" + kind)(arg)

    def step_skip(self, arg) -> None:
        features = arg.get("features", []) if isinstance(arg, dict) else []
        features = [features] if isinstance(features, str) else features
        missing = [f for f in features if f not in SUPPORTED_FEATURES]
        if missing:
            pytest.skip(f"runner feature(s) {missing} not implemented")

    def step_requires(self, arg) -> None:
        features = arg.get("test_runner_features", []) if isinstance(arg, dict) else []
        features = [features] if isinstance(features, str) else features
        missing = [f for f in features if f not in SUPPORTED_FEATURES]
        if missing:
            pytest.skip(f"runner feature(s) {missing} not implemented")

    def step_do(self, arg: dict) -> None:
        arg = dict(arg)
        catch = arg.pop("catch", None)
        for key in ("warnings", "allowed_warnings", "headers", "node_selector", "warnings_regex"):
            arg.pop(key, None)
        ((api, params),) = arg.items()
        params = self.resolve(dict(params or {}))
        fn = self.es
        for part in api.split("."):
            fn = getattr(fn, part)
        if "id" in params:
            params["id"] = str(params["id"])
        body = params.pop("body", None)
        if api == "update" and isinstance(body, dict) and "_source" in params:
            # elasticsearch-py drops the _source URL parameter of an update sent with a body;
            # the body key of that name means the same (UpdateRequest.fetchSource)
            body = {**body, "_source": params.pop("_source")}
        if body is not None:
            if api in ("bulk", "msearch") and isinstance(body, str):
                body = [json.loads(line) for line in body.splitlines() if line.strip()]
            elif api in ("bulk", "msearch"):
                body = [json.loads(line) if isinstance(line, str) else line for line in body]
            params["body"] = body
        try:
            if api in _URL_AND_BODY and body is not None and _URL_AND_BODY[api][2] in params:
                # the upstream test sends the parameter in the URL and in the body (the body wins),
                # which the client's API method refuses: sent as the REST request it stands for
                method, path, _ = _URL_AND_BODY[api]
                body = params.pop("body")
                resp = self.es.perform_request(
                    method,
                    path,
                    params={k: json.dumps(v) if isinstance(v, bool) else v for k, v in params.items()},
                    body=body,
                    headers={"accept": "application/json", "content-type": "application/json"},
                )
            else:
                resp = fn(**params)
        except ApiError as e:
            if catch is None and api == "cluster.health" and e.meta.status == 408:
                self.last = e.body  # a wait that timed out: its body is the answer the test reads
                return
            if catch is None:
                raise AssertionError(f"{api} failed: {e.meta.status} {e.body}") from None
            self.last = e.body
            self._check_catch(catch, e.meta.status, e.body)
            return
        if catch is not None:
            raise AssertionError(f"{api} was expected to fail ({catch}) but returned {resp.body}")
        self.last = resp.body

    @staticmethod
    def _check_catch(catch: str, status: int, body) -> None:
        if catch in CATCH_STATUS:
            assert status == CATCH_STATUS[catch], f"expected {catch}, got {status}: {body}"
        elif catch == "request":
            assert status >= 400
        elif catch.startswith("/") and catch.endswith("/"):
            text = json.dumps(body)
            # the Java runner matches the body's text; quotes inside reasons are not escaped there
            plain = text.replace('\\"', '"')
            assert re.search(catch[1:-1].strip(), text, re.S) or re.search(
                catch[1:-1].strip(), plain, re.S
            ), f"{catch} does not match {text}"
        else:
            raise AssertionError(f"unknown catch [{catch}]")

    def step_set(self, arg: dict) -> None:
        for path, name in arg.items():
            self.stash[name] = self.lookup(path)

    def step_match(self, arg: dict) -> None:
        ((path, expected),) = arg.items()
        actual = self.lookup(path)
        expected = self.resolve(expected)
        if isinstance(expected, str) and len(expected) > 1 and expected.strip().startswith("/"):
            pattern = expected.strip()[1:-1]
            assert re.search(pattern, str(actual), re.X | re.S), f"{path}: {actual!r} !~ {expected}"
        else:
            assert _equal(actual, expected), f"{path}: expected {expected!r}, got {actual!r}"

    def step_length(self, arg: dict) -> None:
        ((path, expected),) = arg.items()
        actual = self.lookup(path)
        assert actual is not None and len(actual) == expected, f"{path}: length of {actual!r} != {expected}"

    def step_is_true(self, path: str) -> None:
        actual = self.lookup(path)
        assert actual not in (None, False, "", 0, "false") and actual != [] and actual != {}, (
            f"{path} is {actual!r}"
        )

    def step_exists(self, path: str) -> None:
        assert self.lookup(path) is not None, f"{path} does not exist"

    def step_not_exists(self, path: str) -> None:
        assert self.lookup(path) is None, f"{path} exists: {self.lookup(path)!r}"

    def step_is_false(self, path: str) -> None:
        actual = self.lookup(path)
        assert actual in (None, False, "", 0, "false") or actual == [] or actual == {}, (
            f"{path} is {actual!r}"
        )

    def _compare(self, arg: dict, op, sym: str) -> None:
        ((path, expected),) = arg.items()
        actual = self.lookup(path)
        assert actual is not None and op(actual, self.resolve(expected)), (
            f"{path}: {actual!r} {sym} {expected!r}"
        )

    def step_gt(self, arg):
        self._compare(arg, lambda a, b: a > b, ">")

    def step_gte(self, arg):
        self._compare(arg, lambda a, b: a >= b, ">=")

    def step_lt(self, arg):
        self._compare(arg, lambda a, b: a < b, "<")

    def step_lte(self, arg):
        self._compare(arg, lambda a, b: a <= b, "<=")

    def step_close_to(self, arg: dict) -> None:
        ((path, spec),) = arg.items()
        actual = self.lookup(path)
        assert abs(actual - spec["value"]) <= spec.get("error", 1e-7), f"{path}: {actual} !~ {spec}"

    def step_contains(self, arg: dict) -> None:
        ((path, expected),) = arg.items()
        actual = self.lookup(path)
        if isinstance(actual, list):
            assert any(_equal(a, expected) or _contains(a, expected) for a in actual), f"{path}: {actual!r}"
        else:
            assert expected in actual, f"{path}: {actual!r}"


def _contains(actual, expected) -> bool:
    return (
        isinstance(actual, dict)
        and isinstance(expected, dict)
        and all(k in actual and _equal(actual[k], v) for k, v in expected.items())
    )


def _equal(actual, expected) -> bool:
    """Equality as the Java runner checks it: numbers by value (50 == 50.0), containers deeply."""
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(_equal(actual[k], v) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_equal(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual is expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(actual) == float(expected)
    return actual == expected


@pytest.mark.parametrize(("path", "name"), list(_cases()))
def test_rest_api_spec(tmp_path, path: Path, name: str) -> None:
    setup, teardown, tests = _load(path)
    es = embedded_client(tmp_path / "engine")
    runner = Runner(es)
    try:
        runner.run(setup)
        runner.run(tests[name])
        runner.run(teardown)
    finally:
        es.close()


def test_every_fixture_cites_its_source() -> None:
    files = sorted(HERE.glob("*.yml"))
    assert files
    for path in files:
        head = "\n".join(path.read_text().splitlines()[:6])
        assert re.search(r"elastic/elasticsearch .*\.yml @ [0-9a-f]{40}", head, re.S), path.name


def test_skip_list_names_real_tests() -> None:
    known = {(p.stem, n) for p in HERE.glob("*.yml") for n in _load(p)[2]}
    assert set(SKIP) <= known, set(SKIP) - known


def test_omitted_list_covers_every_fixture() -> None:
    """Every fixture says which upstream tests it left out (possibly none) and why."""
    stems = {p.stem for p in HERE.glob("*.yml")}
    assert stems <= set(OMITTED), stems - set(OMITTED)
    for stem, tests in OMITTED.items():
        ported = set(_load(HERE / f"{stem}.yml")[2]) if stem in stems else set()
        assert not ported & set(tests), (stem, ported & set(tests))
        assert all(reason for reason in tests.values())
