"""A built search as a dict, JSON, Kibana dev-console text, or a stored mustache search template.

* :func:`to_json` -- the body (a list of the bodies of one ``_msearch`` for ``rrf-client`` and
  ``multisection``), pretty-printed with
  number lists (the query vector) on one line.
* :func:`to_console` -- ``GET <index>/_search`` plus the body, which Kibana's Dev Tools console
  and ``scholar-es console`` both run as is (``rrf-client``, ``multisection``: one
  ``GET <index>/_msearch`` with NDJSON lines). No blank line inside a request: a blank line ends a request in the console.
* :func:`template_script` / :func:`to_template` -- a stored search template of the searches a
  strategy's ``build`` makes (by the plan's strategy: :func:`querybuilder.strategies.to_template`)
  (``PUT _scripts/<id>``, lang ``mustache``) that a backend calls with ``query_text``,
  ``query_vector`` and ``size``: ``POST <index>/_search/template {"id": ..., "params": ...}``.
  The template's ``source`` is a STRING, not an object: ``{{#toJson}}query_vector{{/toJson}}``
  must render as a bare JSON array, and inside an object source it would sit in a quoted string
  (a string ``query_vector`` is read as a hex byte vector). ``{{query_text}}`` sits inside a JSON
  string, which is safe for any text because Elasticsearch's mustache JSON-escapes variables
  for the default ``application/json`` media type (``CustomMustacheFactory.JsonEscapeEncoder``);
  ``{{size}}`` renders a bare number. Checked against reference/current/search-template.html
  ("Create a search template", "Convert parameters to JSON") and the lang-mustache module source.
  Everything but those three values is fixed when the template is made: field boosts, section
  multipliers (the intent rule), weights, filters, per-paper cap and kNN ``k`` (at least the
  plan's size: keep ``size`` at or below it). Expansions depend on the question and are left
  out, so templates suit the strategies bm25, dense, hybrid, sections, rrf and linear; one
  template per strategy, search type and intent rule, named by :func:`template_id`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from elasticsearch.dsl import Search

from querybuilder.dsl import as_query_vector
from querybuilder.plan import QueryPlan
from querybuilder.results import SearchResult

#: ``(plan, query vector) -> its search(es)``: a strategy's ``build``
#: (:meth:`querybuilder.strategies.PlanStrategy.searches`)
Build = Callable[[QueryPlan, Sequence[float]], "Search | tuple[Search, ...]"]

_TEXT_SENTINEL = "QUERYTEXTSENTINEL"
_VECTOR_SENTINEL = "@@QUERY_VECTOR@@"
_SIZE_SENTINEL = "@@SIZE@@"
TEMPLATE_VECTOR = "{{#toJson}}query_vector{{/toJson}}"


def _bodies(search: Search | tuple[Search, ...] | dict | list) -> dict | list[dict]:
    if isinstance(search, (dict, list)):
        return search
    if isinstance(search, tuple):
        return [s.to_dict() for s in search]
    return search.to_dict()


def dumps(obj: object, indent: int = 2, _level: int = 0) -> str:
    """Pretty JSON with lists of scalars (vectors, field lists) kept on one line."""
    pad, inner = " " * (indent * _level), " " * (indent * (_level + 1))
    if isinstance(obj, dict) and obj:
        items = [
            f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dumps(v, indent, _level + 1)}"
            for k, v in obj.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(inner + dumps(v, indent, _level + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def to_json(search: Search | tuple[Search, ...] | dict | list) -> str:
    return dumps(_bodies(search))


def to_console(search: Search | tuple[Search, ...] | dict | list, index: str = "chunks") -> str:
    """Kibana dev-console text for the search (see module doc)."""
    body = _bodies(search)
    if isinstance(body, list):
        lines = [f"GET {index}/_msearch"]
        for b in body:
            lines += ["{}", json.dumps(b, ensure_ascii=False, separators=(",", ":"))]
        return "\n".join(lines) + "\n"
    return f"GET {index}/_search\n{dumps(body)}\n"


def template_id(plan: QueryPlan) -> str:
    rule = f"-{plan.intent.rule}" if plan.section_multipliers else ""
    return f"scholar-es-{plan.strategy}-{plan.search_type}{rule}"


def _placeholders(obj: object, text: str, top: bool = True) -> object:
    if isinstance(obj, dict):
        out: dict[str, object] = {}
        for k, v in obj.items():
            if k == "query_vector":
                out[k] = _VECTOR_SENTINEL
            elif top and k == "size":
                out[k] = _SIZE_SENTINEL
            else:
                out[k] = _placeholders(v, text, top=False)
        return out
    if isinstance(obj, list):
        return [_placeholders(v, text, top=False) for v in obj]
    return obj


def _template_sources(plan: QueryPlan, build: Build) -> list[str]:
    """The mustache source of each body (two for rrf-client) with the three variables."""
    tplan = plan.with_changes(text=_TEXT_SENTINEL, expansions=())
    body = _bodies(build(tplan, [1.0]))
    sources = []
    for b in body if isinstance(body, list) else [body]:
        src = dumps(_placeholders(b, _TEXT_SENTINEL))
        src = src.replace(f'"{_VECTOR_SENTINEL}"', TEMPLATE_VECTOR).replace(f'"{_SIZE_SENTINEL}"', "{{size}}")
        sources.append(src.replace(_TEXT_SENTINEL, "{{query_text}}"))
    return sources


def template_script(plan: QueryPlan, build: Build) -> dict | list[dict]:
    """The ``PUT _scripts/<id>`` body (a list of two for rrf-client: ``<id>-bm25``, ``<id>-dense``)
    of the searches ``build`` makes of ``plan``."""
    scripts = [{"script": {"lang": "mustache", "source": s}} for s in _template_sources(plan, build)]
    return scripts if len(scripts) > 1 else scripts[0]


def template_params(question_text: str, query_vector: Sequence[float], size: int) -> dict:
    """The params a backend sends with the template id."""
    return {"query_text": question_text, "query_vector": as_query_vector(query_vector), "size": size}


def to_template(plan: QueryPlan, build: Build, query_vector: Sequence[float] | None = None) -> str:
    """Console text: ``PUT _scripts/<id>`` (source in Kibana triple quotes) and how to call it."""
    tid = template_id(plan)
    sources = _template_sources(plan, build)
    ids = [f"{tid}-bm25", f"{tid}-dense"] if len(sources) > 1 else [tid]
    out = [
        f"# scholar-es search template: strategy {plan.strategy}, search type {plan.search_type}, "
        f"intent rule {plan.intent.rule}, profile {plan.profile.name}",
        "# params: query_text (the question), query_vector (its embedding), size (<= the baked kNN k)",
    ]
    for sid, src in zip(ids, sources, strict=True):
        out += [
            f"PUT _scripts/{sid}",
            "{",
            '  "script": {',
            '    "lang": "mustache",',
            '    "source": """',
            src,
            '"""',
            "  }",
            "}",
            "",
        ]
    vector = query_vector if query_vector is not None else [1.0]
    params = template_params(plan.text, vector, plan.size)
    if len(sources) > 1:
        out.append(
            "# run both with GET <index>/_msearch/template and fuse the two rankings client-side "
            "(querybuilder.run.rrf_fuse)"
        )
        for sid in ids:
            out.append(f"# {json.dumps({'id': sid, 'params': {**params, 'query_vector': '...'}})}")
    else:
        if query_vector is None:
            out.append("# call (query_vector: the question's embedding, as many numbers as the index dims):")
            out.append(f"# POST {plan.index}/_search/template")
            out.append(f"# {json.dumps({'id': tid, 'params': params}, ensure_ascii=False)}")
        else:
            out += [f"POST {plan.index}/_search/template", dumps({"id": tid, "params": params})]
    return "\n".join(out).rstrip("\n") + "\n"


FORMATS = ("json", "console", "template")


def format_results(result: SearchResult, explain: bool = False) -> str:
    """What ``scholar-es search`` prints for a :class:`querybuilder.results.SearchResult` (without --json)."""
    head = (
        f"# {result.strategy} · intent {result.intent_rule} · fields {result.search_type} · "
        f"{result.total if result.total is not None else '?'} matching chunks · {result.took_ms} ms"
    )
    lines = [head, *(f"# note: {n}" for n in result.notes)]

    def hit_lines(rank: str, h) -> list[str]:
        out = [
            f"{rank:>4} {h.score:8.4f}  {h.paper_id}  [{h.section_type}] {h.section_heading}  — {h.title}",
            f"      {h.snippet}",
        ]
        if explain and h.explanation is not None:
            e = h.explanation
            parts = [f"bm25 {f}={v:.3f}" for f, v in sorted(e.bm25.items())]
            for name, value in (("text", e.text), ("knn", e.knn), ("section×", e.section_multiplier)):
                if value is not None:
                    parts.append(f"{name}={value:.4f}")
            parts += [f"rank[{k}]={v}" for k, v in e.ranks.items()]
            # retrievers (rrf, linear) return no explanation to take apart
            out.append("      = " + (", ".join(parts) if parts else "(no score breakdown for this strategy)"))
        return out

    if result.papers:
        for i, p in enumerate(result.papers, 1):
            lines.append(f"{i:>3}. {p.score:8.4f}  {p.paper_id}  {p.title}")
            for j, h in enumerate(p.chunks, 1):
                lines += hit_lines(f"{i}.{j}", h)
    else:
        for i, h in enumerate(result.hits, 1):
            lines += hit_lines(f"{i}.", h)
    if len(lines) == 1:
        lines.append("(no results)")
    return "\n".join(lines) + "\n"
