"""``GET|POST /_analyze`` and ``/{index}/_analyze``: the tokens an analyzer makes of a text.

Body (AnalyzeAction.Request): ``text`` (a string or an array), and one of ``analyzer``,
``tokenizer`` + ``filter``, ``field`` (the field's index analyzer; a keyword field's normalizer),
``normalizer``; none: the index's default analyzer (``standard`` without an index). Each token has
``token``, ``start_offset``, ``end_offset``, ``type`` and ``position``
(:mod:`engine.analysis.tokens`). Several texts continue one another as AnalyzeAction#simpleAnalyze
counts them: positions after the previous text's last position plus the analyzer's position
increment gap (a field's ``position_increment_gap``, default 100; a custom analyzer's 100; a
built-in analyzer's or an ad-hoc chain's 0), offsets after the previous text plus one.
``explain``, ``attributes``, ``char_filter`` and inline (object) component definitions are
refused by name. ``index.analyze.max_token_count`` (default 10000) bounds the tokens.
"""

from __future__ import annotations

from scholar_es.engine.analysis.analyzers import build_analyzer, get_analyzer, get_normalizer
from scholar_es.engine.analysis.tokens import tokens as analyze_tokens
from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index.mapping import KEYWORD, TEXT, keyword_normalizer

BODY_KEYS = {
    "text",
    "analyzer",
    "tokenizer",
    "filter",
    "token_filters",
    "char_filter",
    "field",
    "normalizer",
    "explain",
    "attributes",
}
MAX_TOKEN_COUNT = 10_000  # IndexSettings.MAX_TOKEN_COUNT_SETTING
DEFAULT_GAP = 100  # TextFieldMapper.Defaults.POSITION_INCREMENT_GAP


def _validation(reason: str) -> EsError:
    return EsError(400, "action_request_validation_exception", f"Validation Failed: 1: {reason};")


def _max_tokens(settings: dict | None) -> int:
    if not settings:
        return MAX_TOKEN_COUNT
    nested = settings.get("analyze")
    value = (
        nested.get("max_token_count") if isinstance(nested, dict) else settings.get("analyze.max_token_count")
    )
    return MAX_TOKEN_COUNT if value is None else int(value)


def analyze(engine, body, index: str | None = None) -> dict:
    body = dict(body or {})
    for key in body:
        if key not in BODY_KEYS:
            raise parsing_error(
                f"Unknown parameter [{key}] in request body or parameter is of the wrong type[VALUE_STRING] "
            )
    for key in ("explain", "attributes"):
        if body.get(key) not in (None, False, [], "false"):
            raise unsupported(f"_analyze.{key}", "the token stream is shown without per-filter detail")
    if body.get("char_filter"):
        raise unsupported("_analyze.char_filter", "char filters are not implemented")
    text = body.get("text")
    texts = text if isinstance(text, list) else [] if text is None else [text]
    if not texts:
        raise _validation("text is missing")
    if not all(isinstance(t, str) for t in texts):
        raise parsing_error("[text] must be a string or an array of strings")
    filters = body.get("filter", body.get("token_filters")) or []
    filters = [filters] if isinstance(filters, str) else filters
    if body.get("normalizer") is not None and (
        body.get("tokenizer") is not None or body.get("analyzer") is not None
    ):
        raise _validation("tokenizer/analyze should be null if normalizer is specified")
    if body.get("analyzer") is not None and (body.get("tokenizer") is not None or filters):
        raise _validation("custom tokenizer or filters cannot be specified when a named analyzer is used")
    if any(isinstance(c, dict) for c in [body.get("tokenizer"), *filters]):
        raise unsupported(
            "_analyze inline tokenizer or filter definitions", "name a built-in or index component"
        )

    handle = None
    if index is not None:
        names = engine.resolve(index)
        handle = engine.handle(names[0])
    analysis = handle.analysis if handle is not None else None
    settings = handle.settings if handle is not None else None

    normalize = None
    gap = 0
    if body.get("normalizer") is not None:
        if handle is None:
            raise _validation("index is required if normalizer is specified")
        normalize = get_normalizer(str(body["normalizer"]), analysis)
        if normalize is None:
            raise illegal_argument(f"failed to find normalizer under [{body['normalizer']}]")
        analyzer = None
    elif body.get("analyzer") is not None:
        name = str(body["analyzer"])
        analyzer = get_analyzer(name, analysis)
        gap = DEFAULT_GAP if analysis and name in (analysis.get("analyzer") or {}) else 0
    elif body.get("tokenizer") is not None:
        analyzer = build_analyzer(str(body["tokenizer"]), [str(f) for f in filters], analysis)
    elif (
        body.get("field") is not None
        and handle is not None
        and handle.mapping.get(str(body["field"])) is not None
    ):
        fs = handle.mapping.get(str(body["field"]))
        if fs.type == KEYWORD:
            normalize = keyword_normalizer(fs, analysis) or (lambda v: v)
            analyzer = None
        elif fs.type == TEXT:
            analyzer = get_analyzer(fs.analyzer, analysis)
            gap = int(fs.raw.get("position_increment_gap", DEFAULT_GAP))
        else:  # AnalyzeAction#getAnalyzer
            raise illegal_argument(
                f"Can't process field [{fs.name}], Analysis requests are only supported on tokenized fields"
            )
    else:
        if filters:
            raise _validation("tokenizer is missing")  # filters without a tokenizer
        analyzer = get_analyzer("default", analysis)

    limit = _max_tokens(settings)
    out: list[dict] = []
    last_position, last_offset = -1, 0
    for value in texts:
        u16 = len(value.encode("utf-16-le", "surrogatepass")) // 2
        if analyzer is None:
            assert normalize is not None
            toks = [(normalize(value), 0, 0, u16, "word")]
            width = 1
        else:
            found = analyze_tokens(analyzer, value)
            toks = [(t.term, t.position, t.start_offset, t.end_offset, t.type) for t in found]
            width = len(analyzer.tokenizer(value))
        for term, pos, start, end, kind in toks:
            if len(out) >= limit:
                raise illegal_argument(
                    f"The number of tokens produced by calling _analyze has exceeded the allowed maximum of [{limit}]. "
                    "This limit can be set by changing the [index.analyze.max_token_count] index level setting."
                )
            out.append(
                {
                    "token": term,
                    "start_offset": last_offset + start,
                    "end_offset": last_offset + end,
                    "type": kind,
                    "position": last_position + pos + 1,
                }
            )
        last_position += width + gap
        last_offset += u16 + 1
    return {"tokens": out}
