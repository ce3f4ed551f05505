"""The Painless statements that update scripts are made of, run one document at a time.

``_update``, ``_update_by_query`` and ``_reindex`` hand a script a ``ctx`` map (``ctx._source``,
``ctx.op``, and the metadata of its context, :data:`CONTEXTS`) and ``params``; the script edits
them. :mod:`engine.script.painless` evaluates score expressions over all documents at once; this
module is its scalar sibling for those statements, on the same tokenizer and with the same error
shapes (``script_exception`` ``compile error`` / ``runtime error`` with ``script_stack``,
``position`` and ``caused_by``).

The subset:

* statements: ``{ ... }``, ``if (...) ... else ...``, declarations (``def x = ...``, ``int``,
  ``long``, ``double``, ``float``, ``boolean``, ``String``, ``Map``, ``List``, ``Object``,
  ``ArrayList``, ``HashMap``), expression statements; ``;`` may be left out after the last one;
* expressions: literals (numbers, strings, ``true``/``false``/``null``, list ``[a, b]`` and map
  ``[k: v]`` / ``[:]`` initializers), ``new ArrayList()`` / ``new HashMap()``, variables, ``ctx``,
  ``params``, field access (``a.b``, ``a?.b``), ``a[i]``, assignments (``=``, ``+=``, ``-=``,
  ``*=``, ``/=``, ``%=``), ``++``/``--``, ``+ - * / %``, comparisons, ``== !=`` (Java's
  ``equals``), ``&& || !``, ``?:``, casts to the declared types;
* methods: on maps ``get put remove containsKey containsValue getOrDefault size isEmpty clear``,
  on lists ``add addAll get set remove contains indexOf size isEmpty clear``, on strings
  ``length contains startsWith endsWith toLowerCase toUpperCase trim substring indexOf replace
  isEmpty``; ``equals`` and ``toString`` on anything.

Numbers follow Java: integer ``/`` truncates, ``%`` is the remainder, an integer division by zero
is ``ArithmeticException: / by zero``; integers are held as 64-bit ``long`` (an ``int`` does not
wrap at 32 bits). Loops, lambdas, ``return``, ``try``, regexes and other classes are refused by
name with ``script_exception``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, script_error
from scholar_es.engine.script.parse import Tok, compile_error, runtime_error, tokenize
from scholar_es.engine.script.values import (
    MISSING,
    Throw,
    arith,
    compare,
    convert,
    default_value,
    equals,
    is_num,
    jstr,
    jtype,
    list_index,
    sized,
    string_method,
    truth,
    wrap64,
)

#: the declarable types (a cast or a declaration of one of them converts as Java would)
TYPES = {
    "def", "int", "long", "short", "byte", "double", "float", "boolean", "String", "Map", "List",
    "Object", "ArrayList", "HashMap", "Collection", "Number", "Integer", "Long", "Double",
}  # fmt: skip
_REFUSED_KEYWORDS = {"for", "while", "do", "return", "try", "catch", "throw", "break", "continue", "this"}


@dataclass(frozen=True)
class Context:
    """The ``ctx`` of one script context (Elasticsearch's ``Metadata`` subclasses): which keys a
    script may write (``writable``), which it may only read, and the values ``ctx.op`` may take."""

    name: str
    readonly: frozenset[str]
    writable: frozenset[str] = frozenset()
    ops: tuple[str, ...] = ("delete", "index", "noop")
    #: legacy spellings of an op (UpdateMetadata: ``none`` is ``noop``)
    aliases: dict[str, str] = field(default_factory=dict)


#: UpdateMetadata, UpsertMetadata, UpdateByQueryMetadata, ReindexMetadata (org.elasticsearch.script)
CONTEXTS = {
    "update": Context(
        "update",
        frozenset({"_index", "_id", "_version", "_routing", "_now", "_type"}),
        aliases={"none": "noop"},
    ),
    "upsert": Context(
        "upsert",
        frozenset({"_index", "_id", "_routing", "_now", "_type"}),
        ops=("create", "noop"),
        aliases={"none": "noop"},
    ),
    "update_by_query": Context("update_by_query", frozenset({"_index", "_id", "_version", "_routing"})),
    "reindex": Context("reindex", frozenset(), writable=frozenset({"_index", "_id", "_version", "_routing"})),
}


class Ctx:
    """``ctx``: a map whose metadata keys follow the rules of its :class:`Context`."""

    def __init__(self, context: Context, values: dict[str, Any]) -> None:
        self.context = context
        self.values = values

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def put(self, key: str, value: Any) -> None:
        c = self.context
        if key == "op":
            op = c.aliases.get(value, value) if isinstance(value, str) else value
            if op not in c.ops:
                raise Throw(
                    "illegal_argument_exception",
                    f"[op] must be one of {', '.join(sorted(c.ops))}, not [{jstr(value)}]",
                )
            self.values["op"] = op
        elif key == "_source":
            if not isinstance(value, dict):
                raise Throw("class_cast_exception", f"cannot cast {jtype(value)} to java.util.Map")
            self.values["_source"] = value
        elif key in c.readonly:
            raise Throw("illegal_argument_exception", f"{key} cannot be updated")
        elif key in c.writable:
            if key == "_index" and not isinstance(value, str):
                raise Throw("illegal_argument_exception", "_index cannot be null")
            if key == "_version" and value is not None and not isinstance(value, int):
                raise Throw("class_cast_exception", f"cannot cast {jtype(value)} to java.lang.Number")
            self.values[key] = value
        else:
            raise Throw(
                "illegal_argument_exception", f"Cannot put key [{key}] with value [{jstr(value)}] into ctx"
            )


# --- AST ----------------------------------------------------------------------------------


class N:
    """A node: ``op``, source offset, children/payload."""

    __slots__ = ("op", "off", "a")

    def __init__(self, op: str, off: int, *a: Any) -> None:
        self.op, self.off, self.a = op, off, a


_BIN_PREC = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}
_COMPOUND = {"=", "+=", "-=", "*=", "/=", "%="}
_MAX_DEPTH = 200


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.toks = tokenize(src)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.kind in ("op", "id") and self.tok.text == text

    def expect(self, text: str) -> Tok:
        if not self.at(text):
            raise self.syntax()
        return self.next()

    def syntax(self, t: Tok | None = None) -> EsError:
        t = t or self.tok
        what = "EOF" if t.kind == "eof" else t.text
        return compile_error(self.src, t.off, f"invalid sequence of tokens near ['{what}'].")

    def refuse(self, off: int, what: str) -> EsError:
        err = script_error(
            f"unsupported construct [{what}] at offset {off} in update script; the embedded engine runs "
            "the update-script subset (assignments, if/else, declarations, map/list/string methods)",
            script=self.src,
        )
        return err

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise compile_error(self.src, self.tok.off, "the script is nested too deeply")

    # statements
    def script(self) -> list[N]:
        out = []
        while self.tok.kind != "eof":
            out.append(self.statement())
        if not out:
            raise compile_error(self.src, 0, "Cannot generate an empty script.")
        return out

    def statement(self) -> N:
        self.deeper()
        try:
            t = self.tok
            if self.at("{"):
                self.next()
                body = []
                while not self.at("}"):
                    if self.tok.kind == "eof":
                        raise self.syntax()
                    body.append(self.statement())
                self.next()
                return N("block", t.off, body)
            if self.at(";"):
                self.next()
                return N("block", t.off, [])
            if self.at("if"):
                self.next()
                self.expect("(")
                cond = self.expr()
                self.expect(")")
                then = self.statement()
                other = None
                if self.at("else"):
                    self.next()
                    other = self.statement()
                return N("if", t.off, cond, then, other)
            if t.kind == "id" and t.text in _REFUSED_KEYWORDS:
                raise self.refuse(t.off, t.text)
            if t.kind == "id" and t.text in TYPES and self.toks[self.i + 1].kind == "id":
                node = self.declaration()
            else:
                node = N("expr", t.off, self.expr())
            if self.at(";"):
                self.next()
            elif not (self.tok.kind == "eof" or (self.at("}"))):
                raise self.syntax()
            return node
        finally:
            self.depth -= 1

    def declaration(self) -> N:
        t = self.next()
        decls = []
        while True:
            name = self.next()
            if name.kind != "id":
                raise self.syntax(name)
            value = None
            if self.at("="):
                self.next()
                value = self.expr()
            decls.append((name.text, value))
            if not self.at(","):
                break
            self.next()
        return N("decl", t.off, t.text, decls)

    # expressions
    def expr(self) -> N:
        self.deeper()
        try:
            left = self.ternary()
            if self.tok.kind == "op" and self.tok.text in _COMPOUND:
                t = self.next()
                if left.op not in ("var", "member", "index"):
                    raise compile_error(
                        self.src, t.off, "invalid assignment: cannot assign a value to this expression"
                    )
                return N("assign", t.off, t.text, left, self.expr())
            if (
                self.tok.kind == "op"
                and self.tok.text.endswith("=")
                and self.tok.text not in ("==", "!=", "<=", ">=")
            ):
                raise self.refuse(self.tok.off, self.tok.text)
            return left
        finally:
            self.depth -= 1

    def ternary(self) -> N:
        cond = self.binary(1)
        if self.at("?"):
            t = self.next()
            a = self.expr()
            self.expect(":")
            b = self.expr()
            return N("cond", t.off, cond, a, b)
        if self.at("?:"):
            t = self.next()
            return N("elvis", t.off, cond, self.expr())
        return cond

    def binary(self, min_prec: int) -> N:
        left = self.unary()
        while True:
            t = self.tok
            if t.kind == "id" and t.text == "instanceof":
                raise self.refuse(t.off, "instanceof")
            prec = _BIN_PREC.get(t.text) if t.kind == "op" else None
            if prec is None:
                if t.kind == "op" and t.text in ("&", "|", "^", "<<", ">>", ">>>", "===", "!==", "=~", "==~"):
                    raise self.refuse(t.off, t.text)
                return left
            if prec < min_prec:
                return left
            self.next()
            right = self.binary(prec + 1)
            left = N("bin", t.off, t.text, left, right)

    def unary(self) -> N:
        self.deeper()
        try:
            t = self.tok
            if t.kind == "op" and t.text in ("!", "-", "+"):
                self.next()
                return N("unary", t.off, t.text, self.unary())
            if t.kind == "op" and t.text in ("++", "--"):
                self.next()
                target = self.unary()
                if target.op not in ("var", "member", "index"):
                    raise self.syntax(t)
                return N("incr", t.off, t.text, target, True)
            if t.kind == "op" and t.text == "~":
                raise self.refuse(t.off, "~")
            if (
                self.at("(")
                and self.toks[self.i + 1].kind == "id"
                and self.toks[self.i + 1].text in TYPES
                and self.toks[self.i + 2].text == ")"
            ):
                self.next()
                to = self.next().text
                self.next()
                return N("cast", t.off, to, self.unary())
            node = self.postfix(self.primary())
            if self.tok.kind == "op" and self.tok.text in ("++", "--"):
                if node.op not in ("var", "member", "index"):
                    raise self.syntax()
                op = self.next()
                return N("incr", op.off, op.text, node, False)
            return node
        finally:
            self.depth -= 1

    def primary(self) -> N:
        t = self.next()
        if t.kind == "num":
            kind, text, base = t.value
            value: Any = int(text, base) if kind in ("int", "long") else float(text)
            return N("lit", t.off, value)
        if t.kind == "str":
            return N("lit", t.off, t.value)
        if t.kind == "id":
            if t.text in ("true", "false"):
                return N("lit", t.off, t.text == "true")
            if t.text == "null":
                return N("lit", t.off, None)
            if t.text == "new":
                cls = self.next()
                if cls.text not in ("ArrayList", "HashMap") or not self.at("("):
                    raise self.refuse(t.off, f"new {cls.text}")
                self.next()
                self.expect(")")
                return N("new", t.off, cls.text)
            if t.text in _REFUSED_KEYWORDS or t.text in ("instanceof",):
                raise self.refuse(t.off, t.text)
            if self.at("("):
                raise self.refuse(t.off, f"{t.text}(...)")
            if self.at("::") or self.at("->"):
                raise self.refuse(t.off, "lambda or method reference")
            return N("var", t.off, t.text)
        if t.kind == "op" and t.text == "(":
            e = self.expr()
            self.expect(")")
            return e
        if t.kind == "op" and t.text == "[":
            return self.initializer(t)
        raise self.syntax(t)

    def initializer(self, t: Tok) -> N:
        if self.at(":"):
            self.next()
            self.expect("]")
            return N("map", t.off, [])
        if self.at("]"):
            self.next()
            return N("list", t.off, [])
        first = self.expr()
        if self.at(":"):
            self.next()
            pairs = [(first, self.expr())]
            while self.at(","):
                self.next()
                k = self.expr()
                self.expect(":")
                pairs.append((k, self.expr()))
            self.expect("]")
            return N("map", t.off, pairs)
        items = [first]
        while self.at(","):
            self.next()
            items.append(self.expr())
        self.expect("]")
        return N("list", t.off, items)

    def postfix(self, base: N) -> N:
        while True:
            t = self.tok
            if t.kind == "op" and t.text in (".", "?."):
                self.next()
                name = self.next()
                if name.kind == "dotint":
                    raise self.refuse(name.off, f".{name.text}")
                if self.at("("):
                    self.next()
                    args = []
                    if not self.at(")"):
                        args.append(self.expr())
                        while self.at(","):
                            self.next()
                            args.append(self.expr())
                    self.expect(")")
                    base = N("call", name.off, base, name.text, args, t.text == "?.")
                else:
                    base = N("member", name.off, base, name.text, t.text == "?.")
            elif t.kind == "op" and t.text == "[":
                self.next()
                key = self.expr()
                self.expect("]")
                base = N("index", t.off, base, key)
            else:
                return base


# --- evaluation ---------------------------------------------------------------------------


class UpdateScript:
    """A compiled update script; :meth:`run` executes it on one ``ctx``."""

    def __init__(self, source: str, params: dict) -> None:
        self.source, self.params = source, params
        self.body = _Parser(source).script()

    def run(self, ctx: Ctx) -> None:
        env: dict[str, Any] = {"ctx": ctx, "params": self.params}
        for stmt in self.body:
            self._exec(stmt, env)

    def _fail(self, node: N, exc: Throw) -> EsError:
        return runtime_error(self.source, node.off, exc.type, exc.reason)

    def _exec(self, node: N, env: dict) -> None:
        op = node.op
        if op == "block":
            for s in node.a[0]:
                self._exec(s, env)
        elif op == "if":
            cond, then, other = node.a
            if self._truth(cond, env):
                self._exec(then, env)
            elif other is not None:
                self._exec(other, env)
        elif op == "decl":
            kind, decls = node.a
            for name, value in decls:
                if name in env:
                    raise compile_error(self.source, node.off, f"variable [{name}] is already defined")
                v = self._eval(value, env) if value is not None else default_value(kind)
                env[name] = self._convert(node, v, kind)
        else:
            self._eval(node.a[0], env)

    def _truth(self, node: N, env: dict) -> bool:
        v = self._eval(node, env)
        try:
            return truth(v, "condition")
        except Throw as e:
            raise self._fail(node, e) from None

    def _convert(self, node: N, v: Any, kind: str) -> Any:
        try:
            return convert(v, kind)
        except Throw as e:
            raise self._fail(node, e) from None

    def _eval(self, node: N, env: dict) -> Any:
        try:
            return getattr(self, "_" + node.op)(node, env)
        except Throw as e:
            raise self._fail(node, e) from None

    def _lit(self, node: N, env: dict) -> Any:
        return node.a[0]

    def _new(self, node: N, env: dict) -> Any:
        return [] if node.a[0] == "ArrayList" else {}

    def _list(self, node: N, env: dict) -> Any:
        return [self._eval(x, env) for x in node.a[0]]

    def _map(self, node: N, env: dict) -> Any:
        return {self._eval(k, env): self._eval(v, env) for k, v in node.a[0]}

    def _var(self, node: N, env: dict) -> Any:
        name = node.a[0]
        if name not in env:
            raise compile_error(self.source, node.off, f"cannot resolve symbol [{name}]")
        return env[name]

    def _member(self, node: N, env: dict) -> Any:
        base, name, safe = node.a
        obj = self._eval(base, env)
        if obj is None:
            if safe:
                return None
            raise Throw("null_pointer_exception", f"cannot access field [{name}] of a null value")
        return _get(obj, name)

    def _index(self, node: N, env: dict) -> Any:
        obj = self._eval(node.a[0], env)
        key = self._eval(node.a[1], env)
        if obj is None:
            raise Throw("null_pointer_exception", "cannot index a null value")
        if isinstance(obj, list):
            return obj[list_index(obj, key)]
        return _get(obj, key)

    def _assign(self, node: N, env: dict) -> Any:
        op, target, value_node = node.a
        value = self._eval(value_node, env)
        if op != "=":
            value = arith(op[0], self._eval(target, env), value)
        self._store(target, value, env)
        return value

    def _incr(self, node: N, env: dict) -> Any:
        op, target, prefix = node.a
        old = self._eval(target, env)
        new = arith(op[0], old, 1)
        self._store(target, new, env)
        return new if prefix else old

    def _store(self, target: N, value: Any, env: dict) -> None:
        if target.op == "var":
            name = target.a[0]
            if name in ("ctx", "params") or name not in env:
                raise compile_error(self.source, target.off, f"cannot assign a value to [{name}]")
            env[name] = value
            return
        obj = self._eval(target.a[0], env)
        key = target.a[1] if target.op == "member" else self._eval(target.a[1], env)
        if obj is None:
            raise Throw("null_pointer_exception", f"cannot set [{jstr(key)}] on a null value")
        if isinstance(obj, Ctx):
            obj.put(key, value)
        elif isinstance(obj, dict):
            obj[key] = value
        elif isinstance(obj, list) and target.op == "index":
            obj[list_index(obj, key)] = value
        else:
            raise Throw("illegal_argument_exception", f"cannot set [{jstr(key)}] on {jtype(obj)}")

    def _cast(self, node: N, env: dict) -> Any:
        return convert(self._eval(node.a[1], env), node.a[0])

    def _unary(self, node: N, env: dict) -> Any:
        op, arg = node.a
        v = self._eval(arg, env)
        if op == "!":
            return not truth(v, "!")
        if not is_num(v):
            raise Throw("class_cast_exception", f"Cannot apply [{op}] operation to type [{jtype(v)}].")
        return v if op == "+" else (wrap64(-v) if isinstance(v, int) else -v)

    def _bin(self, node: N, env: dict) -> Any:
        op, left, right = node.a
        a = self._eval(left, env)
        if op in ("&&", "||"):
            if truth(a, op) == (op == "||"):
                return op == "||"
            return truth(self._eval(right, env), op)
        b = self._eval(right, env)
        if op == "==":
            return equals(a, b)
        if op == "!=":
            return not equals(a, b)
        if op in ("<", "<=", ">", ">="):
            return compare(op, a, b)
        return arith(op, a, b)

    def _cond(self, node: N, env: dict) -> Any:
        c, a, b = node.a
        return self._eval(a if self._truth(c, env) else b, env)

    def _elvis(self, node: N, env: dict) -> Any:
        v = self._eval(node.a[0], env)
        return v if v is not None else self._eval(node.a[1], env)

    def _call(self, node: N, env: dict) -> Any:
        base, name, arg_nodes, safe = node.a
        obj = self._eval(base, env)
        args = [self._eval(a, env) for a in arg_nodes]
        if obj is None:
            if safe:
                return None
            raise Throw("null_pointer_exception", f"cannot invoke [{name}] on a null value")
        return _method(obj, name, args)


def _get(obj: Any, key: Any) -> Any:
    if isinstance(obj, Ctx):
        return obj.get(key)
    if isinstance(obj, dict):
        return obj.get(key)
    if isinstance(obj, list) and key == "length":
        raise Throw("illegal_argument_exception", f"dynamic getter [{jtype(obj)}, length] not found")
    raise Throw("illegal_argument_exception", f"dynamic getter [{jtype(obj)}, {jstr(key)}] not found")


def _method(obj: Any, name: str, args: list) -> Any:
    n = len(args)
    if name == "equals" and n == 1:
        return equals(obj, args[0])
    if name == "toString" and n == 0:
        return jstr(obj)
    if isinstance(obj, Ctx):
        obj = obj.values if name in ("get", "containsKey", "size", "isEmpty", "getOrDefault") else obj
    if isinstance(obj, dict):
        if name == "get" and n == 1:
            return obj.get(args[0])
        if name == "getOrDefault" and n == 2:
            return obj.get(args[0], args[1])
        if name == "put" and n == 2:
            old = obj.get(args[0])
            obj[args[0]] = args[1]
            return old
        if name == "remove" and n == 1:
            return obj.pop(args[0], None)
        if name == "containsKey" and n == 1:
            return args[0] in obj
        if name == "containsValue" and n == 1:
            return any(equals(v, args[0]) for v in obj.values())
        if name in ("size", "isEmpty", "clear") and n == 0:
            return sized(obj, name)
    elif isinstance(obj, list):
        if name == "add" and n == 1:
            obj.append(args[0])
            return True
        if name == "add" and n == 2:
            obj.insert(list_index([*obj, None], args[0]), args[1])
            return None
        if name == "addAll" and n == 1 and isinstance(args[0], list):
            obj.extend(args[0])
            return bool(args[0])
        if name == "get" and n == 1:
            return obj[list_index(obj, args[0])]
        if name == "set" and n == 2:
            i = list_index(obj, args[0])
            old, obj[i] = obj[i], args[1]
            return old
        if name == "remove" and n == 1:
            if isinstance(args[0], int) and not isinstance(args[0], bool):  # List.remove(int)
                return obj.pop(list_index(obj, args[0]))
            for i, v in enumerate(obj):
                if equals(v, args[0]):
                    del obj[i]
                    return True
            return False
        if name == "contains" and n == 1:
            return any(equals(v, args[0]) for v in obj)
        if name == "indexOf" and n == 1:
            return next((i for i, v in enumerate(obj) if equals(v, args[0])), -1)
        if name in ("size", "isEmpty", "clear") and n == 0:
            return sized(obj, name)
    elif isinstance(obj, str):
        out = string_method(obj, name, args)
        if out is not MISSING:
            return out
    raise Throw("illegal_argument_exception", f"dynamic method [{jtype(obj)}, {name}/{n}] not found")


# --- compiling -----------------------------------------------------------------------------


def script_parts(script: Any, stored: Any = None) -> tuple[str, dict]:
    """``(source, params)`` of a request's ``script`` (a string, or an object with ``source`` or
    the ``id`` of a stored script; ``stored(id)`` looks one up). Raises Elasticsearch's errors for
    a malformed one (``Script.parse``)."""
    if isinstance(script, str):
        return script, {}
    if not isinstance(script, dict):
        raise parsing_error("[script] must be a string or an object")
    unknown = sorted(set(script) - {"source", "params", "lang", "id", "options"})
    if unknown:
        raise parsing_error(f"[script] unknown field [{unknown[0]}]")
    params = script.get("params") or {}
    if not isinstance(params, dict):
        raise parsing_error("[script] params must be an object")
    if "id" in script:
        if "source" in script:
            raise illegal_argument(
                "must specify either [source] for an inline script or [id] for a stored script"
            )
        found = stored(str(script["id"])) if stored is not None else None
        if found is None:  # ScriptService.getScriptFromClusterState
            raise EsError(
                404,
                "resource_not_found_exception",
                f"unable to find script [{script['id']}] in cluster state",
            )
        if found.get("lang", "painless") != "painless":
            raise illegal_argument(f"script_lang not supported [{found.get('lang')}]")
        return str(found["source"]), params
    lang = script.get("lang", "painless")
    if lang != "painless":
        raise illegal_argument(f"script_lang not supported [{lang}]")
    source = script.get("source")
    if not isinstance(source, str):
        raise illegal_argument(
            "must specify either [source] for an inline script or [id] for a stored script"
        )
    return source, params


def compile_update_script(script: Any, stored: Any = None) -> UpdateScript:
    """Compile a request's ``script`` for the update contexts (see :func:`script_parts`)."""
    source, params = script_parts(script, stored)
    return UpdateScript(source, params)


def run_script(script: UpdateScript, context: str, values: dict[str, Any]) -> dict[str, Any]:
    """Run ``script`` on a ``ctx`` of ``context`` holding ``values`` (``_source`` included, copied
    by the caller when it must stay unchanged); returns the ctx's values after it."""
    ctx = Ctx(CONTEXTS[context], values)
    script.run(ctx)
    return ctx.values
