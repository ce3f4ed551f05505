"""Search-hit highlighting, shaped like Elasticsearch's default (``unified``) highlighter.

Request options (top level and per field, field-level winning): ``fields`` (an object or a
list of one-field objects; wildcards allowed), ``pre_tags``/``post_tags`` (default ``<em>`` /
``</em>``), ``fragment_size`` (100), ``number_of_fragments`` (5; 0 returns each matching
value whole), ``highlight_query``, ``require_field_match`` (true), ``no_match_size`` (0),
``order`` (``none`` = position, or ``score``), ``encoder`` (``default`` or ``html``),
``type`` (``unified`` only), ``boundary_scanner`` (``sentence`` only), ``tags_schema``
(``styled``), ``max_analyzed_offset`` (matches past it are not marked). Other options are refused.

Each hit gets ``"highlight": {field: [fragment, ...]}`` holding only the fields that matched.

How the fragments are built (and where they differ from Lucene's unified highlighter):

* Matches are the field's own tokens (the field's index analyzer, with offsets) whose term is
  one the query (or ``highlight_query``) asks for on that field: ``match``, ``match_phrase``,
  ``match_phrase_prefix``, ``match_bool_prefix``, ``multi_match``, ``combined_fields``,
  ``term``, ``terms``, ``prefix`` and ``wildcard`` clauses, through ``bool`` (not
  ``must_not``), ``constant_score``, ``function_score``, ``dis_max``, ``boosting`` and
  ``nested``. Every matching token is tagged on its own: a phrase's words are tagged one by one
  (Lucene 9 with weight matches tags ``<em>quick brown</em>`` as one span) and wherever the
  words occur, not only where the whole phrase occurs.
* A passage is the sentence holding a match (the text up to ``.``, ``!`` or ``?`` followed by
  whitespace, or a line break), extended with the following sentences while it stays within
  ``fragment_size``; a sentence longer than ``fragment_size`` is cut at the first word boundary
  after ``fragment_size`` characters (``BoundedBreakIteratorScanner``). Passages are trimmed.
* Passages are ranked by the number of distinct matched terms, then the number of matches,
  then position (Lucene scores passages with BM25 over the passage), the best
  ``number_of_fragments`` are kept, in text order unless ``order: score``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable

from scholar_es.engine.analysis.analyzers import get_analyzer
from scholar_es.engine.errors import illegal_argument, parsing_error, unsupported, x_content_parse_error
from scholar_es.engine.index.mapping import KEYWORD, TEXT

_SUPPORTED_OPTIONS = {
    "pre_tags",
    "post_tags",
    "fragment_size",
    "number_of_fragments",
    "highlight_query",
    "require_field_match",
    "no_match_size",
    "order",
    "encoder",
    "type",
    "boundary_scanner",
    "max_analyzed_offset",
    "tags_schema",
}
#: options Elasticsearch accepts that the engine refuses by name (other highlighter types' options)
_REFUSED_OPTIONS = {
    "boundary_chars",
    "boundary_max_scan",
    "boundary_scanner_locale",
    "force_source",
    "fragment_offset",
    "fragmenter",
    "highlight_filter",
    "matched_fields",
    "phrase_limit",
}
_OPTIONS = _SUPPORTED_OPTIONS | _REFUSED_OPTIONS
MAX_FRAGMENTS = 100_000
_HTML = str.maketrans({'"': "&quot;", "&": "&amp;", "<": "&lt;", ">": "&gt;", "'": "&#x27;", "/": "&#x2F;"})
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+|\n+")
_STYLED = [f'<em class="hlt{i}">' for i in range(1, 11)]

# Predicate over an analyzed term of the field, or a set of exact terms.
Matcher = Callable[[str], bool]


def parse_highlight(spec) -> dict:
    """Validate a ``highlight`` section; returns {field pattern: options}."""
    if not isinstance(spec, dict):
        raise parsing_error("[highlight] must be an object")
    unknown = set(spec) - _OPTIONS - {"fields"}
    if unknown:
        raise parsing_error(f"[highlight] unknown field [{sorted(unknown)[0]}]")
    fields = spec.get("fields")
    if fields is None:
        raise parsing_error("[highlight] requires [fields]")
    if isinstance(fields, list):
        items: list[tuple[str, dict]] = []
        for f in fields:
            if not isinstance(f, dict) or len(f) != 1:
                raise parsing_error("[highlight] [fields] array elements must be objects with one field each")
            items.extend(f.items())
    elif isinstance(fields, dict):
        items = list(fields.items())
    else:
        raise parsing_error("[highlight] [fields] must be an object or an array")
    top = _parse_tags({k: v for k, v in spec.items() if k != "fields"}, "highlight")
    out = {}
    for name, opts in items:
        opts = opts or {}
        if not isinstance(opts, dict):
            raise parsing_error(f"[highlight] options of field [{name}] must be an object")
        bad = set(opts) - _OPTIONS
        if bad:
            raise parsing_error(f"[highlight_field] unknown field [{sorted(bad)[0]}]")
        merged = {**top, **_parse_tags(opts, "highlight_field")}
        for key in merged:
            if key not in _SUPPORTED_OPTIONS:
                raise unsupported(f"highlight.{key}")
        if "highlight_query" in merged and not isinstance(merged["highlight_query"], dict):
            raise parsing_error("[highlight] [highlight_query] must be a query object")
        if merged.get("type", "unified") != "unified":
            raise unsupported(f"highlight type {merged['type']}", "use the default unified highlighter")
        if merged.get("boundary_scanner", "sentence") != "sentence":
            raise unsupported(f"highlight boundary_scanner {merged['boundary_scanner']}")
        if merged.get("encoder", "default") not in ("default", "html"):
            raise parsing_error(f"Unknown encoder [{merged['encoder']}]")
        if merged.get("order", "none") not in ("none", "score"):
            raise parsing_error(f"Unknown order [{merged['order']}]")
        if merged.get("tags_schema") not in (None, "styled"):
            raise parsing_error(f"Unknown tag schema [{merged['tags_schema']}]")
        for key in ("fragment_size", "number_of_fragments", "no_match_size", "max_analyzed_offset"):
            if key in merged and (not isinstance(merged[key], int) or isinstance(merged[key], bool)):
                raise parsing_error(f"[highlight_field] failed to parse field [{key}]")
        limit = merged.get("max_analyzed_offset")
        if limit is not None and (limit < -1 or limit == 0):  # AbstractHighlighterBuilder#maxAnalyzedOffset
            raise x_content_parse_error(
                "[highlight] failed to parse field [max_analyzed_offset]",
                illegal_argument(f"[max_analyzed_offset] must be a positive integer, or -1, got [{limit}]"),
            )
        if limit == -1:  # -1: the index limit, which the embedded engine does not impose
            del merged["max_analyzed_offset"]
        if "require_field_match" in merged:  # declareBoolean: a JSON boolean or "true"/"false"
            flag = merged["require_field_match"]
            if not isinstance(flag, bool) and flag not in ("true", "false"):
                raise x_content_parse_error(
                    "[highlight] failed to parse field [require_field_match]",
                    illegal_argument(
                        f"Failed to parse value [{flag}] as only [true] or [false] are allowed."
                    ),
                )
            merged["require_field_match"] = flag is True or flag == "true"
        n = merged.get("number_of_fragments", 5)
        if not 0 <= n <= MAX_FRAGMENTS:  # HighlightBuilder: bounded since 8.x/9.x
            raise x_content_parse_error(
                "[highlight] failed to parse field [number_of_fragments]",
                illegal_argument(f"[number_of_fragments] must be between [0] and [{MAX_FRAGMENTS}]"),
            )
        if merged.get("fragment_size", 100) < 1 and n != 0:
            raise illegal_argument(
                f"[fragment_size] must be a positive integer, got [{merged['fragment_size']}]"
            )
        out[name] = merged
    return out


def _parse_tags(opts: dict, where: str) -> dict:
    """``pre_tags``/``post_tags`` as Elasticsearch's ``declareStringArray`` reads them.

    AbstractHighlighterBuilder.setupParser: ObjectParser parseArray takes one value or an array of
    values, each read by ``XContentParser.text()`` (a number or boolean becomes its text); a null
    or an object has no text and the request fails with a 400 ``x_content_parse_exception``."""
    out = dict(opts)
    for key in ("pre_tags", "post_tags"):
        if key not in opts:
            continue
        raw = opts[key]
        values = raw if isinstance(raw, list) else [raw]
        tags = []
        for v in values:
            if isinstance(v, bool):
                tags.append("true" if v else "false")
            elif isinstance(v, (str, int, float)):
                tags.append(str(v))
            else:
                raise x_content_parse_error(
                    f"[{where}] failed to parse field [{key}]",
                    illegal_argument(
                        f"[{key}] must be a string or an array of strings, got [{json.dumps(v)}]; "
                        f'write e.g. "{key}": ["<em>"]'
                    ),
                )
        out[key] = tags
    return out


# --- query terms -----------------------------------------------------------------------------


class _Terms:
    """Terms (or predicates) a query asks for, per field; ``None`` key = any field."""

    def __init__(self) -> None:
        self.exact: dict[str, set[str]] = {}
        self.preds: dict[str, list[Matcher]] = {}

    def add(self, field: str, terms) -> None:
        self.exact.setdefault(field, set()).update(terms)

    def add_pred(self, field: str, pred: Matcher) -> None:
        self.preds.setdefault(field, []).append(pred)

    def matcher(self, field: str, require_field_match: bool) -> Matcher | None:
        fields = [field] if require_field_match else list({*self.exact, *self.preds})
        exact = set().union(*(self.exact.get(f, set()) for f in fields)) if fields else set()
        preds = [p for f in fields for p in self.preds.get(f, [])]
        if not exact and not preds:
            return None
        return lambda t: t in exact or any(p(t) for p in preds)


def query_terms(query, seg, analysis) -> _Terms:
    out = _Terms()
    _walk(query, seg, analysis, out)
    return out


def _analyze(seg, analysis, field: str, text) -> list[str]:
    fs = seg.mapping.get(field)
    if fs is None:
        return []
    if fs.type != TEXT:
        return [text if isinstance(text, str) else str(text).lower() if isinstance(text, bool) else str(text)]
    return get_analyzer(fs.query_analyzer, analysis)(str(text))


def _fields_of(seg, patterns) -> list[str]:
    out: list[str] = []
    for p in patterns or ["*"]:
        name = str(p).split("^", 1)[0]
        if any(c in name for c in "*?"):
            rx = re.compile(fnmatch.translate(name))
            out.extend(
                n for n, fs in seg.mapping.fields.items() if rx.match(n) and fs.type in (TEXT, KEYWORD)
            )
        else:
            out.append(name)
    return out


def _starts_with(prefix: str) -> Matcher:
    return lambda t: t.startswith(prefix)


def _wildcard(rx: re.Pattern[str]) -> Matcher:
    return lambda t: rx.match(t) is not None


def _walk(q, seg, analysis, out: _Terms) -> None:
    if not isinstance(q, dict):
        return
    for kind, body in q.items():
        if kind in ("match", "match_phrase", "match_phrase_prefix", "match_bool_prefix"):
            if not isinstance(body, dict):
                continue
            for field, spec in body.items():
                text = spec.get("query") if isinstance(spec, dict) else spec
                terms = _analyze(seg, analysis, field, text)
                if kind in ("match_phrase_prefix", "match_bool_prefix") and terms:
                    out.add_pred(field, _starts_with(terms[-1]))
                    terms = terms[:-1]
                out.add(field, terms)
        elif kind in ("multi_match", "combined_fields") and isinstance(body, dict):
            for field in _fields_of(seg, body.get("fields")):
                terms = _analyze(seg, analysis, field, body.get("query", ""))
                if body.get("type") in ("phrase_prefix", "bool_prefix") and terms:
                    out.add_pred(field, _starts_with(terms[-1]))
                out.add(field, terms)
        elif kind == "term" and isinstance(body, dict):
            for field, spec in body.items():
                v = spec.get("value") if isinstance(spec, dict) else spec
                out.add(field, [v if isinstance(v, str) else str(v)])
        elif kind == "terms" and isinstance(body, dict):
            for field, values in body.items():
                if isinstance(values, list):
                    out.add(field, [v if isinstance(v, str) else str(v) for v in values])
        elif kind == "prefix" and isinstance(body, dict):
            for field, spec in body.items():
                v = str(spec.get("value") if isinstance(spec, dict) else spec)
                out.add_pred(field, _starts_with(v))
        elif kind == "wildcard" and isinstance(body, dict):
            for field, spec in body.items():
                v = str(spec.get("value", spec.get("wildcard")) if isinstance(spec, dict) else spec)
                out.add_pred(field, _wildcard(re.compile(fnmatch.translate(v))))
        elif kind == "bool" and isinstance(body, dict):
            for occur in ("must", "should", "filter"):
                clauses = body.get(occur)
                for c in clauses if isinstance(clauses, list) else [clauses]:
                    _walk(c, seg, analysis, out)
        elif kind == "constant_score" and isinstance(body, dict):
            _walk(body.get("filter"), seg, analysis, out)
        elif kind in ("function_score", "script_score", "nested") and isinstance(body, dict):
            _walk(body.get("query"), seg, analysis, out)
        elif kind == "dis_max" and isinstance(body, dict):
            for c in body.get("queries") or []:
                _walk(c, seg, analysis, out)
        elif kind == "boosting" and isinstance(body, dict):
            _walk(body.get("positive"), seg, analysis, out)


# --- fragments -------------------------------------------------------------------------------


def _token_spans(fs, analysis, text: str) -> list[tuple[int, int, str]]:
    """(start, end, term) of the field's tokens; keywords are one token (the whole value)."""
    if fs.type == KEYWORD:
        return [(0, len(text), text)]
    analyzer = get_analyzer(fs.analyzer, analysis)
    term_of = getattr(analyzer, "_term", None)
    spans, pos = [], 0
    for tok in analyzer.tokenizer(text):
        i = text.find(tok, pos)
        if i < 0:
            continue
        pos = i + len(tok)
        term = term_of(tok) if term_of is not None else tok
        if term is not None:
            spans.append((i, pos, term))
    return spans


def _sentences(text: str) -> list[tuple[int, int]]:
    bounds, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        bounds.append((start, m.end()))
        start = m.end()
    if start < len(text):
        bounds.append((start, len(text)))
    return bounds


def _passage(text: str, sentences: list[tuple[int, int]], at: int, size: int) -> tuple[int, int]:
    """BoundedBreakIteratorScanner: the sentence holding ``at``, grown while within ``size``."""
    idx = next(i for i, (s, e) in enumerate(sentences) if s <= at < e or e == len(text))
    start, end = sentences[idx]
    if end - start > size:
        cut = re.search(r"\W", text[start + size :])
        return start, (start + size + cut.start()) if cut else len(text)
    j = idx + 1
    while j < len(sentences) and sentences[j][1] - start <= size:
        end = sentences[j][1]
        j += 1
    return start, end


def _render(text: str, start: int, end: int, hits, pre: str, post: str, encode) -> str:
    out, pos = [], start
    for s, e in hits:
        if s < start or e > end:
            continue
        out.append(encode(text[pos:s]))
        out.append(pre + encode(text[s:e]) + post)
        pos = e
    out.append(encode(text[pos:end]))
    return "".join(out).strip()


def highlight_value(fs, analysis, text: str, match: Matcher, opts: dict) -> list[tuple[tuple, str]]:
    """[(rank key, fragment)] of one field value."""
    pre = (opts.get("pre_tags") or (_STYLED if opts.get("tags_schema") == "styled" else ["<em>"]))[0]
    post = (opts.get("post_tags") or ["</em>"])[0]
    # encoder html: Lucene's SimpleHTMLEncoder
    encode = (lambda s: s.translate(_HTML)) if opts.get("encoder") == "html" else (lambda s: s)
    limit = opts.get("max_analyzed_offset")  # only the first characters are analyzed
    spans = [
        (s, e, t)
        for s, e, t in _token_spans(fs, analysis, text)
        if match(t) and (limit is None or e <= limit)
    ]
    if not spans:
        return []
    hits = [(s, e) for s, e, _ in spans]
    n_frags = opts.get("number_of_fragments", 5)
    if n_frags == 0 or fs.type == KEYWORD:
        return [((0, 0, 0), _render(text, 0, len(text), hits, pre, post, encode))]
    size = opts.get("fragment_size", 100)
    sentences = _sentences(text)
    # matches in text order: one inside the current passage joins it, the next one opens a new
    # passage at its own sentence (as the highlighter walks matches through the break iterator)
    passages: dict[tuple[int, int], list] = {}
    current: tuple[int, int] | None = None
    for s, e, t in sorted(spans):
        if current is None or s >= current[1]:
            current = _passage(text, sentences, s, size)
        passages.setdefault(current, []).append((s, e, t))
    out = []
    for (ps, pe), inside in passages.items():
        rank = (-len({t for _, _, t in inside}), -len(inside), ps)
        out.append((rank, _render(text, ps, pe, [(s, e) for s, e, _ in inside], pre, post, encode)))
    return out


def highlight_hit(seg, analysis, fields: dict, terms_for: Callable[[dict], _Terms], source: dict) -> dict:
    """The ``highlight`` section of one hit (fields without a match are left out)."""
    out: dict[str, list[str]] = {}
    for pattern, opts in fields.items():
        names = _fields_of(seg, [pattern]) if any(c in pattern for c in "*?") else [pattern]
        for name in names:
            fs = seg.mapping.get(name)
            if fs is None or fs.type not in (TEXT, KEYWORD):
                continue
            terms = terms_for(opts)
            match = terms.matcher(name, bool(opts.get("require_field_match", True)))
            values = _source_values(source, name, seg.mapping)
            frags: list[tuple[tuple, str]] = []
            if match is not None:
                for i, v in enumerate(values):
                    for rank, frag in highlight_value(fs, analysis, v, match, opts):
                        frags.append(((*rank[:2], i, rank[2]), frag))
            if frags:
                n = opts.get("number_of_fragments", 5)
                if n:
                    frags.sort(key=lambda x: x[0])
                    frags = frags[:n]
                    if opts.get("order", "none") != "score":
                        frags.sort(key=lambda x: (x[0][2], x[0][3]))
                out[name] = [f for _, f in frags]
            elif opts.get("no_match_size", 0) > 0 and values:
                out[name] = [_no_match(values[0], opts["no_match_size"])]
    return out


def _no_match(text: str, size: int) -> str:
    if len(text) <= size:
        return text
    cut = re.search(r"\W", text[size:])
    return text[: size + cut.start()] if cut else text


def _source_values(source: dict, name: str, mapping) -> list[str]:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):  # title.keyword reads title's value
        path = parts[:n]
        if n < len(parts) and mapping.get(".".join(path)) is None:
            continue
        vals = _dig(source, path)
        if vals:
            return [
                v if isinstance(v, str) else str(v) for v in vals if v is not None and not isinstance(v, dict)
            ]
    return []


def _dig(obj, path: list[str]) -> list:
    if isinstance(obj, list):  # arrays (of arrays) are read element by element, at any depth
        return [x for item in obj for x in _dig(item, path)]
    if not path:
        return [obj]
    if not isinstance(obj, dict):
        return []
    for i in range(len(path), 0, -1):  # keys may hold dots themselves
        key = ".".join(path[:i])
        if key in obj:
            return _dig(obj[key], path[i:])
    return []


__all__ = ["parse_highlight", "query_terms", "highlight_hit", "highlight_value"]
