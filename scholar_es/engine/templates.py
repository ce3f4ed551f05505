"""Search templates: the mustache subset Elasticsearch's ``lang: mustache`` scripts use.

Supported: ``{{var}}`` (JSON-string escaped, as Elasticsearch escapes for JSON templates),
``{{{var}}}`` and ``{{& var}}`` (raw), dotted names, sections ``{{#x}}...{{/x}}`` over lists and
truthy values, inverted sections ``{{^x}}...{{/x}}``, comments ``{{! ...}}`` and the
Elasticsearch functions ``{{#toJson}}name{{/toJson}}`` and ``{{#join}}name{{/join}}``.
Partials and delimiter changes are refused with an error naming them. A tiny renderer of
our own (rather than a mustache package) because Elasticsearch's escaping and its toJson/join
extensions are not standard mustache.
"""

from __future__ import annotations

import json
import re

from scholar_es.engine.errors import EsError, illegal_argument

# {{{raw}}} first, so that "{{size}}}" (a tag followed by a JSON brace) stays a plain tag
_TAG = re.compile(r"\{\{(\{)\s*()(.*?)\s*\}\}\}|\{\{()\s*([#^/!&>=]?)\s*(.*?)\s*\}\}", re.S)


def _lookup(stack: list, name: str):
    if name == ".":
        return stack[-1]
    for ctx in reversed(stack):
        value, found = ctx, True
        for part in name.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                found = False
                break
        if found:
            return value
    return None


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _escape(s: str) -> str:
    return json.dumps(s)[1:-1]  # JSON string escaping without the quotes


def _parse(template: str) -> list:
    """Tokens into a tree: str | ("var", name, raw) | ("section", name, inverted, children)."""
    root: list = []
    stack: list[tuple[str, list]] = [("", root)]
    pos = 0
    for m in _TAG.finditer(template):
        stack[-1][1].append(template[pos : m.start()])
        pos = m.end()
        if m.group(1):
            triple, sigil, name = "{", "", m.group(3)
        else:
            triple, sigil, name = "", m.group(5), m.group(6)
        if sigil == "!":
            continue
        if sigil in (">", "="):
            raise illegal_argument(
                f"mustache {'partials' if sigil == '>' else 'delimiter changes'} are not supported "
                "by the embedded engine"
            )
        if sigil in ("#", "^"):
            node = ("section", name, sigil == "^", [])
            stack[-1][1].append(node)
            stack.append((name, node[3]))
        elif sigil == "/":
            if len(stack) == 1 or stack[-1][0] != name:
                raise EsError(400, "mustache_exception", f"Mismatched start/end tags: [{name}]")
            stack.pop()
        else:
            stack[-1][1].append(("var", name, bool(triple) or sigil == "&"))
    if len(stack) > 1:
        raise EsError(400, "mustache_exception", f"Unclosed section [{stack[-1][0]}]")
    root.append(template[pos:])
    return root


def _render(nodes: list, stack: list) -> str:
    out = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif node[0] == "var":
            text = _text(_lookup(stack, node[1]))
            out.append(text if node[2] else _escape(text))
        else:
            _, name, inverted, children = node
            if name in ("toJson", "join") and not inverted:
                inner = "".join(c for c in children if isinstance(c, str)).strip()
                value = _lookup(stack, inner)
                out.append(
                    json.dumps(value) if name == "toJson" else ",".join(_text(v) for v in (value or []))
                )
                continue
            value = _lookup(stack, name)
            falsy = value in (None, False, "", 0) or value == []
            if inverted:
                if falsy:
                    out.append(_render(children, stack))
            elif isinstance(value, list):
                out.extend(_render(children, [*stack, item]) for item in value)
            elif not falsy:
                out.append(_render(children, [*stack, value] if isinstance(value, dict) else stack))
    return "".join(out)


def render_string(source: str, params: dict) -> str:
    return _render(_parse(source), [params or {}])


def render_template(engine, body: dict) -> dict:
    """The search body a ``_search/template`` request stands for (stored or inline)."""
    unknown = set(body) - {"id", "source", "params", "explain", "profile"}
    if unknown:
        raise illegal_argument(f"[search_template] unknown field [{next(iter(unknown))}]")
    if "id" in body:
        script = engine.store.get_script(body["id"])
        if script is None:
            raise EsError(
                404, "resource_not_found_exception", f"unable to find script [{body['id']}] in cluster state"
            )
        source = script["source"]
    elif "source" in body:
        source = body["source"]
    else:
        raise illegal_argument("template is missing: give [id] or [source]")
    if not isinstance(source, str):
        source = json.dumps(source)
    rendered = render_string(source, body.get("params") or {})
    try:
        out = json.loads(rendered)
    except json.JSONDecodeError as e:
        raise EsError(
            400,
            "x_content_parse_exception",
            f"the rendered template is not valid JSON ({e.msg} at char {e.pos}): {rendered[:200]}",
        ) from None
    if body.get("explain"):
        out["explain"] = True
    return out
