"""Tokenizer, parser and static typing for the Painless score-expression subset.

Hand-written lexer (rules follow ``modules/lang-painless/src/main/antlr/PainlessLexer.g4``) and a
Pratt parser with Java operator precedence.  The result is a small typed AST of :class:`Node`
objects that :mod:`engine.script.painless` evaluates with numpy.  Nothing here ever calls ``eval``.

Static types: ``int long float double boolean`` as in Java, ``String`` for string literals and
``def`` for everything Painless types dynamically (``params.*`` and ``doc[...]`` values, which are
read through ``Map.get`` and therefore ``def``).  Arithmetic on two static operands uses Java's
binary numeric promotion; anything involving ``def`` is promoted at run time from the values'
actual types (which is what Painless' ``DefMath`` does).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from scholar_es.engine.errors import EsError, script_error

MAX_SOURCE = 16384  # Painless' CompilerSettings.MAXIMUM_SOURCE_LENGTH
MAX_NEST = 100  # parser recursion guard (parentheses, unary chains, ternaries)
MAX_DEPTH = 128  # AST depth guard (evaluation is recursive)

NUMERIC = ("int", "long", "float", "double")
_OPS = sorted(
    [
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        ".",
        "?.",
        ",",
        ";",
        "!",
        "~",
        "*",
        "/",
        "%",
        "+",
        "-",
        "<<",
        ">>",
        ">>>",
        "<",
        "<=",
        ">",
        ">=",
        "==",
        "===",
        "!=",
        "!==",
        "&",
        "^",
        "|",
        "&&",
        "||",
        "?",
        ":",
        "?:",
        "::",
        "->",
        "=~",
        "==~",
        "++",
        "--",
        "=",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "&=",
        "^=",
        "|=",
        "<<=",
        ">>=",
        ">>>=",
    ],
    key=len,
    reverse=True,
)
ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "<<=", ">>=", ">>>="}
KEYWORDS = {
    "if",
    "in",
    "else",
    "while",
    "do",
    "for",
    "continue",
    "break",
    "return",
    "new",
    "try",
    "catch",
    "throw",
    "this",
    "instanceof",
    "true",
    "false",
    "null",
    "def",
    "boolean",
    "byte",
    "short",
    "char",
    "int",
    "long",
    "float",
    "double",
}
BINARY_PREC = {
    "||": 2,
    "&&": 3,
    "|": 4,
    "^": 5,
    "&": 6,
    "==": 7,
    "!=": 7,
    "===": 7,
    "!==": 7,
    "<": 8,
    "<=": 8,
    ">": 8,
    ">=": 8,
    "instanceof": 8,
    "<<": 9,
    ">>": 9,
    ">>>": 9,
    "+": 10,
    "-": 10,
    "*": 11,
    "/": 11,
    "%": 11,
    "=~": 7,
    "==~": 7,
}
SUPPORTED_BINARY = {"||", "&&", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"}
MATH_FUNCS = {
    "abs": 1,
    "acos": 1,
    "asin": 1,
    "atan": 1,
    "atan2": 2,
    "cbrt": 1,
    "ceil": 1,
    "copySign": 2,
    "cos": 1,
    "cosh": 1,
    "exp": 1,
    "expm1": 1,
    "floor": 1,
    "hypot": 2,
    "log": 1,
    "log10": 1,
    "log1p": 1,
    "max": 2,
    "min": 2,
    "pow": 2,
    "rint": 1,
    "round": 1,
    "signum": 1,
    "sin": 1,
    "sinh": 1,
    "sqrt": 1,
    "tan": 1,
    "tanh": 1,
    "toDegrees": 1,
    "toRadians": 1,
}
SCORE_FUNCS = {
    "saturation": 2,
    "sigmoid": 3,
    "cosineSimilarity": 2,
    "dotProduct": 2,
    "l1norm": 2,
    "l2norm": 2,
    "decayNumericLinear": 5,
    "decayNumericExp": 5,
    "decayNumericGauss": 5,
}
UNSUPPORTED_FUNCS = {
    "randomScore",
    "decayGeoLinear",
    "decayGeoExp",
    "decayGeoGauss",
    "decayDateLinear",
    "decayDateExp",
    "decayDateGauss",
    "hamming",
    "documentFrequencyStatistics",
    "termFrequencyStatistics",
    "field",
    "$",
}
PARAM_CALLS = {"get": 1, "size": 0, "isEmpty": 0, "getLength": 0, "containsKey": 1}


# ---------------------------------------------------------------------------------------- errors


def _position(source: str, off: int) -> tuple[list[str], dict[str, int]]:
    start, end = max(0, off - 25), min(len(source), off + 25)
    stack = [source[start:end], " " * (off - start) + "^---- HERE"]
    return stack, {"offset": off, "start": start, "end": end}


def _with_position(err: EsError, source: str, off: int, cause: dict[str, str] | None) -> EsError:
    stack, pos = _position(source, off)
    extra: dict[str, Any] = {"script_stack": stack, **err.extra, "position": pos}
    if cause is not None:
        extra["caused_by"] = cause
        err.args = (f"[{err.type}] {err.reason}: [{cause['type']}] {cause['reason']}",)
    err.extra = extra
    return err


def compile_error(source: str, off: int, detail: str, type: str = "illegal_argument_exception") -> EsError:
    """Painless rejected the script (Elasticsearch: ``script_exception`` / ``compile error``)."""
    return _with_position(
        script_error("compile error", script=source), source, off, {"type": type, "reason": detail}
    )


def runtime_error(source: str, off: int, type: str, detail: str) -> EsError:
    """The script threw while executing (Elasticsearch: ``script_exception`` / ``runtime error``)."""
    return _with_position(
        script_error("runtime error", script=source), source, off, {"type": type, "reason": detail}
    )


def unsupported_error(source: str, off: int, what: str) -> EsError:
    """Valid (or possibly valid) Painless that the embedded engine does not evaluate."""
    what = what if len(what) <= 60 else what[:57] + "..."
    reason = (
        f"unsupported construct [{what}] at offset {off} in script; "
        "the embedded engine evaluates score expressions only"
    )
    return _with_position(script_error(reason, script=source), source, off, None)


# ------------------------------------------------------------------------------------------- AST


class Node:
    """One AST node: ``op`` names the kind, ``a`` holds the children / payload, ``st`` the static type."""

    __slots__ = ("op", "off", "a", "st", "depth")

    def __init__(self, op: str, off: int, *a: Any, st: str = "def") -> None:
        self.op, self.off, self.a, self.st = op, off, a, st
        self.depth = 1 + max((c.depth for c in _children(a)), default=0)

    def walk(self):
        yield self
        for c in _children(self.a):
            yield from c.walk()


def _children(a: Any):
    for c in a:
        if isinstance(c, Node):
            yield c
        elif isinstance(c, tuple):
            yield from _children(c)


def promote(a: str, b: str) -> str:
    """Java binary numeric promotion of two numeric types."""
    return NUMERIC[max(NUMERIC.index(a), NUMERIC.index(b))]


# ------------------------------------------------------------------------------------- tokenizer


class Tok:
    __slots__ = ("kind", "text", "off", "value")

    def __init__(self, kind: str, text: str, off: int, value: Any = None) -> None:
        self.kind, self.text, self.off, self.value = kind, text, off, value


def _is_id_start(c: str) -> bool:
    return c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_id_char(c: str) -> bool:
    return _is_id_start(c) or ("0" <= c <= "9")


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n, after_dot = 0, len(src), False
    while i < n:
        c = src[i]
        if after_dot:  # PainlessLexer mode AFTER_DOT: only DOTINTEGER or DOTID may follow a dot
            after_dot = False
            j = i
            if c.isdigit() and c.isascii():
                j = i + 1 if c == "0" else _scan(src, i, str.isdigit)
                toks.append(Tok("dotint", src[i:j], i, int(src[i:j])))
            elif _is_id_start(c):
                j = _scan(src, i, _is_id_char)
                toks.append(Tok("id", src[i:j], i))
            else:
                raise compile_error(src, i, f"unexpected character [{c}].")
            i = j
            continue
        if c in " \t\n\r":
            i += 1
            continue
        if src.startswith("//", i):
            j = min((k for k in (src.find("\n", i), src.find("\r", i)) if k >= 0), default=-1)
            if j >= 0:
                i = j + 1
                continue
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j >= 0:
                i = j + 2
                continue
        if "0" <= c <= "9":
            i = _number(src, i, toks)
        elif _is_id_start(c):
            j = _scan(src, i, _is_id_char)
            toks.append(Tok("id", src[i:j], i))
            i = j
        elif c in "'\"":
            i = _string(src, i, toks)
        else:
            op = next((o for o in _OPS if src.startswith(o, i)), None)
            if op is None:
                raise compile_error(src, i, f"unexpected character [{c}].")
            toks.append(Tok("op", op, i))
            after_dot = op in (".", "?.")
            i += len(op)
    toks.append(Tok("eof", "<EOF>", n))
    return toks


def _scan(src: str, i: int, pred) -> int:
    while i < len(src) and pred(src[i]) and src[i].isascii():
        i += 1
    return i


def _number(src: str, i: int, toks: list[Tok]) -> int:
    n = len(src)
    hexd = "0123456789abcdefABCDEF"
    if src.startswith(("0x", "0X"), i) and i + 2 < n and src[i + 2] in hexd:  # HEX
        j = i + 2
        while j < n and src[j] in hexd:
            j += 1
        kind = "long" if j < n and src[j] in "lL" else "int"
        toks.append(Tok("num", src[i : j + (kind == "long")], i, (kind, src[i + 2 : j], 16)))
        return j + (kind == "long")
    if src[i] == "0" and i + 1 < n and src[i + 1] in "01234567":  # OCTAL
        j = i + 1
        while j < n and src[j] in "01234567":
            j += 1
        kind = "long" if j < n and src[j] in "lL" else "int"
        toks.append(Tok("num", src[i : j + (kind == "long")], i, (kind, src[i + 1 : j], 8)))
        return j + (kind == "long")
    j = i + 1 if src[i] == "0" else _scan(src, i, str.isdigit)
    decimal = False
    if j + 1 < n and src[j] == "." and src[j + 1].isdigit() and src[j + 1].isascii():
        j = _scan(src, j + 1, str.isdigit)
        decimal = True
    if j < n and src[j] in "eE":
        k = j + 1 + (j + 1 < n and src[j + 1] in "+-")
        if k < n and src[k].isdigit() and src[k].isascii():
            j = _scan(src, k, str.isdigit)
            decimal = True
    text = src[i:j]
    suffix = src[j] if j < n and src[j] in ("fFdD" if decimal else "lLfFdD") else ""
    kind = {"l": "long", "f": "float", "d": "double", "": "double" if decimal else "int"}[suffix.lower()]
    toks.append(Tok("num", text + suffix, i, (kind, text, 10)))
    return j + len(suffix)


def _string(src: str, i: int, toks: list[Tok]) -> int:
    q, j, out = src[i], i + 1, []
    while j < len(src):
        c = src[j]
        if c == "\\":  # Painless strings only allow the escapes \" (or \') and \\
            if j + 1 < len(src) and src[j + 1] in (q, "\\"):
                out.append(src[j + 1])
                j += 2
                continue
            break
        if c == q:
            toks.append(Tok("str", src[i : j + 1], i, "".join(out)))
            return j + 1
        out.append(c)
        j += 1
    raise compile_error(src, i, f"unexpected character [{q}].")


def parse_float32(text: str) -> np.float32:
    """``Float.parseFloat``: decimal text rounded once, to nearest-even, to a float32."""
    d = float(text)
    with np.errstate(over="ignore"):
        f = np.float32(d)
    mant, _, exp = text.lower().partition("e")
    if not np.isfinite(f) or f == 0 or len(mant) > 40 or (exp and abs(int(exp)) > 60):
        return f
    exact = Fraction(text)
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.int32)) & 1))


# ---------------------------------------------------------------------------------------- parser


class Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        if len(src) > MAX_SOURCE:
            raise compile_error(
                src,
                0,
                f"Scripts may be no longer than {MAX_SOURCE} characters.  The passed in "
                f"script is {len(src)} characters.  Consider using a plugin if a script longer "
                "than this length is a requirement.",
            )
        self.toks = tokenize(src)
        self.i = 0
        self.nest = 0

    # -- helpers
    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def peek(self, k: int) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.kind == "op" and t.text == text

    def expect(self, text: str) -> Tok:
        if not self.at(text):
            raise self.syntax()
        return self.next()

    def syntax(self, t: Tok | None = None) -> EsError:
        t = t or self.tok
        if t.kind == "eof":
            return compile_error(self.src, t.off, "unexpected end of script.")
        return compile_error(self.src, t.off, f"invalid sequence of tokens near ['{t.text}'].")

    def unsupported(self, off: int, what: str) -> EsError:
        return unsupported_error(self.src, off, what)

    def check_depth(self, node: Node) -> Node:
        if node.depth > MAX_DEPTH:
            raise self.unsupported(node.off, f"expression nested deeper than {MAX_DEPTH}")
        return node

    # -- grammar
    def parse_script(self) -> Node:
        t = self.tok
        if t.kind == "id" and t.text == "return":
            self.next()
        elif t.kind == "id" and t.text in KEYWORDS - {"true", "false", "null", "new", "this"}:
            nxt = self.peek(1)
            if t.text in NUMERIC + ("boolean", "byte", "short", "char", "def") and nxt.kind == "id":
                raise self.unsupported(t.off, f"declaration {t.text} {nxt.text}")
            raise self.unsupported(t.off, t.text)
        elif t.kind == "op" and t.text == "{":
            raise self.unsupported(t.off, "block {...}")
        root = self.expr()
        if self.at(";"):
            self.next()
            if self.tok.kind != "eof":
                raise self.unsupported(self.tok.off, "multiple statements")
        if self.tok.kind != "eof":
            raise self.syntax()
        return _check_result(self.src, root)

    def expr(self, min_prec: int = 0) -> Node:
        self.nest += 1
        if self.nest > MAX_NEST:
            raise self.unsupported(self.tok.off, f"expression nested deeper than {MAX_NEST}")
        left = self.unary()
        while True:
            t = self.tok
            name = t.text if t.kind == "op" or (t.kind == "id" and t.text == "instanceof") else None
            if name in ASSIGN_OPS:
                raise self.unsupported(t.off, f"assignment {name}")
            if name == "?" and min_prec <= 1:
                self.next()
                a = self.expr(0)
                self.expect(":")
                b = self.expr(1)
                left = self.check_depth(_typed_cond(self.src, t.off, left, a, b))
                continue
            if name == "?:" and min_prec <= 1:
                raise self.unsupported(t.off, "elvis operator ?:")
            prec = BINARY_PREC.get(name or "")
            if prec is None or prec <= min_prec:
                break
            if name not in SUPPORTED_BINARY:
                raise self.unsupported(t.off, f"operator {name}")
            self.next()
            right = self.expr(prec)
            left = self.check_depth(_typed_binary(self.src, t.off, name, left, right))
        self.nest -= 1
        return left

    def unary(self) -> Node:
        t = self.tok
        if t.kind == "op" and t.text in ("-", "+", "!"):
            self.next()
            nt = self.tok
            if t.text == "-" and nt.kind == "num":  # Painless folds '-' into a numeric constant
                self.next()
                return self.postfix(_number_node(self.src, nt, negate=True, off=t.off))
            self.nest += 1
            if self.nest > MAX_NEST:
                raise self.unsupported(t.off, f"expression nested deeper than {MAX_NEST}")
            operand = self.unary()
            self.nest -= 1
            return self.check_depth(_typed_unary(self.src, t.off, t.text, operand))
        if t.kind == "op" and t.text in ("++", "--", "~"):
            raise self.unsupported(t.off, f"operator {t.text}")
        if t.kind == "op" and t.text == "(":
            nt, nnt = self.peek(1), self.peek(2)
            if (
                nt.kind == "id"
                and nt.text in ("int", "long", "float", "double", "boolean", "byte", "short", "char", "def")
                and nnt.kind == "op"
                and nnt.text == ")"
            ):
                self.i += 3
                if nt.text not in NUMERIC:
                    raise self.unsupported(t.off, f"cast ({nt.text})")
                operand = self.unary()
                if operand.st not in NUMERIC + ("def",):
                    raise compile_error(
                        self.src, t.off, f"Cannot cast from [{_jname(operand.st)}] to [{nt.text}]."
                    )
                return self.check_depth(Node("cast", t.off, nt.text, operand, st=nt.text))
        return self.postfix(self.primary())

    def primary(self) -> Node:
        t = self.next()
        if t.kind == "num":
            return _number_node(self.src, t)
        if t.kind == "str":
            return Node("str", t.off, t.value, st="String")
        if t.kind == "op":
            if t.text == "(":
                e = self.expr(0)
                self.expect(")")
                return e
            if t.text == "/":
                raise self.unsupported(t.off, "regex literal")
            if t.text in ("[", "{"):
                raise self.unsupported(t.off, "list/map initializer")
            raise self.syntax(t)
        if t.kind == "id":
            name = t.text
            if name in ("true", "false"):
                return Node("const", t.off, "boolean", np.bool_(name == "true"), st="boolean")
            if name in KEYWORDS:
                raise self.unsupported(t.off, name)
            if self.at("("):
                return self.call(t)
            if name in ("doc", "params", "_score", "Math"):
                return Node("name", t.off, name)
            if self.tok.kind == "op" and self.tok.text in ASSIGN_OPS | {"++", "--"}:
                raise self.unsupported(self.tok.off, f"assignment {self.tok.text}")
            raise self.unsupported(t.off, name)
        raise self.syntax(t)

    def args(self) -> list[Node]:
        self.expect("(")
        out: list[Node] = []
        if not self.at(")"):
            while True:
                out.append(self.expr(0))
                if not self.at(","):
                    break
                self.next()
        self.expect(")")
        return out

    def call(self, t: Tok) -> Node:
        name = t.text
        if name in UNSUPPORTED_FUNCS or name not in SCORE_FUNCS:
            raise self.unsupported(t.off, name)
        args = self.args()
        if len(args) != SCORE_FUNCS[name]:
            raise compile_error(self.src, t.off, f"Unknown call [{name}] with [{len(args)}] arguments.")
        vector = name in ("cosineSimilarity", "dotProduct", "l1norm", "l2norm")
        for k, arg in enumerate(args):
            if not (vector or arg.st in NUMERIC + ("def",)):
                raise compile_error(self.src, arg.off, f"Cannot cast from [{_jname(arg.st)}] to [double].")
            if vector and k == 0 and arg.st != "def":
                raise compile_error(
                    self.src, arg.off, f"Cannot cast from [{_jname(arg.st)}] to [java.util.List]."
                )
            if vector and k == 1 and arg.st not in ("def", "String"):
                raise compile_error(
                    self.src, arg.off, f"Cannot cast from [{_jname(arg.st)}] to [java.lang.String]."
                )
        return Node("func", t.off, name, tuple(args), st="double")

    def postfix(self, base: Node) -> Node:
        chain: list[
            tuple
        ] = []  # ("field", name, off, end) | ("index", node, off, end) | ("call", name, args, off, end)
        while True:
            t = self.tok
            if t.kind != "op":
                break
            if t.text in (".", "?."):
                if t.text == "?.":
                    raise self.unsupported(t.off, "null-safe operator ?.")
                self.next()
                m = self.next()
                if m.kind == "dotint":
                    chain.append(("field", m.value, t.off, m.off + len(m.text)))
                elif m.kind == "id":
                    if self.at("("):
                        args = self.args()
                        chain.append(("call", m.text, tuple(args), t.off, self.toks[self.i - 1].off + 1))
                    else:
                        chain.append(("field", m.text, t.off, m.off + len(m.text)))
                else:
                    raise self.syntax(m)
            elif t.text == "[":
                self.next()
                e = self.expr(0)
                close = self.expect("]")
                chain.append(("index", e, t.off, close.off + 1))
            elif t.text in ("++", "--"):
                raise self.unsupported(t.off, f"operator {t.text}")
            else:
                break
        if self.tok.kind == "op" and self.tok.text in ASSIGN_OPS:
            raise self.unsupported(self.tok.off, f"assignment {self.tok.text}")
        return self.check_depth(self.resolve(base, chain))

    # -- chains: doc['f'].value, params.x[0], Math.log(...)
    def _what(self, link: tuple) -> str:
        return self.src[link[-2] : link[-1]]

    def resolve(self, base: Node, chain: list[tuple]) -> Node:
        if base.op != "name":
            if chain:
                raise self.unsupported(chain[0][-2], self._what(chain[0]))
            return base
        name = base.a[0]
        if name == "_score":
            if chain:
                raise self.unsupported(chain[0][-2], self._what(chain[0]))
            return Node("score", base.off, st="double")
        if name == "Math":
            if not chain:
                raise self.unsupported(base.off, "Math")
            link, rest = chain[0], chain[1:]
            if link[0] == "field" and link[1] in ("E", "PI"):
                node = Node(
                    "const", base.off, "double", np.float64(np.e if link[1] == "E" else np.pi), st="double"
                )
            elif link[0] == "call" and link[1] in MATH_FUNCS:
                args = link[2]
                if len(args) != MATH_FUNCS[link[1]]:
                    raise compile_error(
                        self.src,
                        link[-2],
                        f"Unknown call [{link[1]}] with [{len(args)}] arguments on type [Math].",
                    )
                for arg in args:
                    if arg.st not in NUMERIC + ("def",):
                        raise compile_error(
                            self.src, arg.off, f"Cannot cast from [{_jname(arg.st)}] to [double]."
                        )
                node = Node(
                    "math", base.off, link[1], tuple(args), st="long" if link[1] == "round" else "double"
                )
            else:
                raise self.unsupported(base.off, "Math" + self._what(link))
            if rest:
                raise self.unsupported(rest[0][-2], self._what(rest[0]))
            return node
        if name == "doc":
            if not chain:
                raise self.unsupported(base.off, "doc")
            link = chain[0]
            if link[0] == "index":
                key = link[1]
            elif link[0] == "field" and isinstance(link[1], str):
                key = Node("str", link[-2], link[1], st="String")
            elif link[0] == "call" and link[1] == "get" and len(link[2]) == 1:
                key = link[2][0]
            else:
                raise self.unsupported(link[-2], "doc" + self._what(link))
            if key.st not in ("String", "def"):
                raise compile_error(
                    self.src, key.off, f"Cannot cast from [{_jname(key.st)}] to [java.lang.String]."
                )
            node = Node("docref", base.off, key)
            rest = [(link[0], link[1], len(link[2]) if link[0] == "call" else -1) for link in chain[2:]]
            if rest in (
                [("call", "toInstant", 0), ("call", "toEpochMilli", 0)],
                [("call", "toEpochSecond", 0)],
            ) and chain[1][:2] == ("field", "value"):  # ZonedDateTime of a date field
                return Node("docdate", chain[1][-2], key, "ms" if len(rest) == 2 else "s")
            for k, link in enumerate(chain[1:]):
                if k > 0:
                    raise self.unsupported(link[-2], self._what(link))
                kind, member = link[0], link[1]
                if (kind, member) in (("field", "value"), ("call", "getValue")):
                    node = Node("docvalue", link[-2], key)
                elif (kind, member) in (("call", "size"), ("field", "length"), ("call", "getLength")):
                    node = Node("docsize", link[-2], key)
                elif (kind, member) in (("field", "empty"), ("call", "isEmpty")):
                    node = Node("docempty", link[-2], key)
                elif (kind, member) in (("field", "magnitude"), ("call", "getMagnitude")):
                    node = Node("docmagnitude", link[-2], key)
                elif kind == "index" or (kind, member) == ("call", "get") and len(link[2]) == 1:
                    idx = member if kind == "index" else link[2][0]
                    if not (idx.op == "const" and idx.st == "int" and int(idx.a[1]) == 0):
                        raise self.unsupported(link[-2], self._what(link) + " (only index 0 is supported)")
                    node = Node("docvalue", link[-2], key)
                else:
                    raise self.unsupported(link[-2], self._what(link))
                if kind == "call" and member != "get" and link[2]:
                    raise compile_error(
                        self.src, link[-2], f"Unknown call [{member}] with [{len(link[2])}] arguments."
                    )
            return node
        # params
        if not chain:
            raise self.unsupported(base.off, "params")
        steps = []
        for link in chain:
            if link[0] == "call":
                if PARAM_CALLS.get(link[1]) != len(link[2]):
                    raise self.unsupported(link[-2], self._what(link))
                steps.append(("call", link[1], link[2], link[-2]))
            else:
                steps.append((link[0], link[1], None, link[-2]))
        return Node("param", base.off, tuple(steps))


# ---------------------------------------------------------------------------- typing of operators

_JNAMES = {"String": "java.lang.String", "def": "def"}


def _jname(st: str) -> str:
    return _JNAMES.get(st, st)


def _number_node(src: str, t: Tok, negate: bool = False, off: int | None = None) -> Node:
    kind, digits, radix = t.value
    off = t.off if off is None else off
    text = ("-" if negate else "") + digits
    if kind in ("int", "long"):
        bits = 32 if kind == "int" else 64
        value = int(text, radix) if len(digits.lstrip("0")) < 40 else None
        if value is None or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise compile_error(src, off, f"Invalid {kind} constant [{text}].")
        data: Any = np.int32(value) if kind == "int" else np.int64(value)
    elif kind == "float":
        data = parse_float32(text)
    else:
        data = np.float64(float(text))
    return Node("const", off, kind, data, st=kind)


def _typed_unary(src: str, off: int, op: str, e: Node) -> Node:
    if op == "!":
        if e.st not in ("boolean", "def"):
            raise compile_error(src, off, f"Cannot cast from [{_jname(e.st)}] to [boolean].")
        return Node("not", off, e, st="boolean")
    if e.st not in NUMERIC + ("def",):
        if e.st == "String":
            raise unsupported_error(src, e.off, "string literal")
        raise compile_error(src, off, f"Cannot apply [{op}] operation to type [{_jname(e.st)}].")
    return Node("neg" if op == "-" else "pos", off, e, st=e.st)


def _typed_binary(src: str, off: int, op: str, a: Node, b: Node) -> Node:
    for x in (a, b):
        if x.st == "String":
            raise unsupported_error(src, x.off, "string literal")
    if op in ("&&", "||"):
        for x in (a, b):
            if x.st not in ("boolean", "def"):
                raise compile_error(src, x.off, f"Cannot cast from [{_jname(x.st)}] to [boolean].")
        return Node("and" if op == "&&" else "or", off, a, b, st="boolean")
    static = a.st != "def" and b.st != "def"
    if static:
        ok = (a.st in NUMERIC and b.st in NUMERIC) or (op in ("==", "!=") and a.st == b.st == "boolean")
        if not ok:
            raise compile_error(
                src, off, f"Cannot apply [{op}] operation to types [{_jname(a.st)}] and [{_jname(b.st)}]."
            )
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return Node("cmp", off, op, a, b, st="boolean")
    return Node("arith", off, op, a, b, st=promote(a.st, b.st) if static else "def")


def _typed_cond(src: str, off: int, c: Node, a: Node, b: Node) -> Node:
    if c.st not in ("boolean", "def"):
        raise compile_error(src, c.off, f"Cannot cast from [{_jname(c.st)}] to [boolean].")
    if "def" in (a.st, b.st):
        st = "def"
    elif a.st in NUMERIC and b.st in NUMERIC:
        st = promote(a.st, b.st)
    elif a.st == b.st:
        st = a.st
    else:
        raise compile_error(src, off, f"Cannot cast from [{_jname(b.st)}] to [{_jname(a.st)}].")
    return Node("cond", off, c, a, b, st=st)


def _check_result(src: str, root: Node) -> Node:
    """A score script returns ``double``: the value must be (castable to) a number."""
    if root.st not in NUMERIC + ("def",):
        if root.st == "String":
            raise unsupported_error(src, root.off, "string literal")
        raise compile_error(src, root.off, f"Cannot cast from [{_jname(root.st)}] to [double].")
    if root.op == "docref":
        raise compile_error(
            src, root.off, "Cannot cast from [org.elasticsearch.index.fielddata.ScriptDocValues] to [double]."
        )
    return root


def parse(source: str) -> Node:
    """Parse and statically type a Painless score expression; raises :class:`EsError` only."""
    try:
        return Parser(source).parse_script()
    except RecursionError:  # pragma: no cover - guarded by MAX_NEST/MAX_DEPTH
        raise unsupported_error(source, 0, "deeply nested expression") from None
