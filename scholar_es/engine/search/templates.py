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

from scholar_es.engine import xcontent
from scholar_es.engine.errors import EsError, illegal_argument

# {{{raw}}} first, so that "{{size}}}" (a tag followed by a JSON brace) stays a plain tag
_TAG = re.compile(r"\{\{(\{)\s*()(.*?)\s*\}\}\}|\{\{()\s*([#^/!&>=]?)\s*(.*?)\s*\}\}", re.S)


MAX_SECTION_DEPTH = 100  # the engine's own bound: rendering recurses once per nested section


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
            if len(stack) > MAX_SECTION_DEPTH:
                raise EsError(
                    400,
                    "mustache_exception",
                    f"Sections nested more than [{MAX_SECTION_DEPTH}] deep at [{name}]; flatten the template",
                )
            node: tuple[str, str, bool, list] = ("section", name, sigil == "^", [])
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


# mustache.max_output_size_bytes (MustacheScriptEngine.MUSTACHE_RESULT_SIZE_LIMIT, default "1mb"):
# Elasticsearch renders into a SizeLimitingStringWriter and answers ElasticsearchParseException
# "Mustache script result size limit exceeded" (parse_exception, 400).  Counted here in characters
# of the rendered text, as SizeLimitingStringWriter counts chars.
MAX_OUTPUT_SIZE = 1024 * 1024
# Sections nested over lists multiply (three sections over 100 items: a million passes) and can
# do so without writing anything; Elasticsearch has no such bound (mustache.java would run on),
# so the engine adds one: at most this many tags and section passes per rendering.
MAX_RENDER_STEPS = 1_000_000


def _size_limit_exceeded(reason: str) -> EsError:
    return EsError(400, "parse_exception", f"Mustache script result size limit exceeded: {reason}")


class _Renderer:
    """Renders a parsed template into one buffer, counting its size and its steps."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.size = 0
        self.steps = 0

    def write(self, text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT_SIZE:
            head = "".join(self.out)[:20]
            raise _size_limit_exceeded(
                f"String [{head}...] has size [{self.size}] which exceeds the size limit [{MAX_OUTPUT_SIZE}] "
                "(mustache.max_output_size_bytes)"
            )
        self.out.append(text)

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_RENDER_STEPS:
            raise EsError(
                400,
                "parse_exception",
                f"Mustache template rendering exceeded [{MAX_RENDER_STEPS}] tag and section steps "
                "(sections nested over lists multiply); flatten the template or pass fewer items",
            )

    def render(self, nodes: list, stack: list) -> None:
        for node in nodes:
            if isinstance(node, str):
                self.write(node)
                continue
            self.step()
            if node[0] == "var":
                text = _text(_lookup(stack, node[1]))
                self.write(text if node[2] else _escape(text))
                continue
            _, name, inverted, children = node
            if name in ("toJson", "join") and not inverted:
                inner = "".join(c for c in children if isinstance(c, str)).strip()
                value = _lookup(stack, inner)
                self.write(
                    json.dumps(value) if name == "toJson" else ",".join(_text(v) for v in (value or []))
                )
                continue
            value = _lookup(stack, name)
            falsy = value in (None, False, "", 0) or value == []
            if inverted:
                if falsy:
                    self.render(children, stack)
            elif isinstance(value, list):
                for item in value:
                    self.step()
                    self.render(children, [*stack, item])
            elif not falsy:
                self.render(children, [*stack, value] if isinstance(value, dict) else stack)


def render_string(source: str, params: dict) -> str:
    """The rendered template; a ``parse_exception`` past 1 MB of output or 1,000,000 steps."""
    renderer = _Renderer()
    renderer.render(_parse(source), [params or {}])
    return "".join(renderer.out)


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
        out = xcontent.loads(rendered)
    except xcontent.JsonSyntaxError as e:
        raise EsError(
            400,
            "x_content_parse_exception",
            f"the rendered template is not valid JSON ({e.msg} at line {e.line}, column {e.col}): "
            f"{rendered[:200]}",
        ) from None
    if body.get("explain"):
        out["explain"] = True
    return out
