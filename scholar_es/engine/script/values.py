"""Java's semantics for the values of update scripts (:mod:`engine.script.update_script`):
``String.valueOf``, ``Double.toString``, Painless ``==`` on ``def``, casts, arithmetic (integer
``/`` truncating, ``%`` the remainder, ``/ by zero``), comparisons and the string methods offered.
A failure is a :class:`Throw`: the Java exception's type and message."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

INTEGRAL = {"int", "long", "short", "byte", "Integer", "Long"}


class Throw(Exception):
    """A Java exception thrown while the script runs: its type and message."""

    def __init__(self, type: str, reason: str) -> None:
        super().__init__(reason)
        self.type, self.reason = type, reason


def jtype(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "java.lang.Boolean"
    if isinstance(v, int):
        return "java.lang.Integer" if -(2**31) <= v < 2**31 else "java.lang.Long"
    if isinstance(v, float):
        return "java.lang.Double"
    if isinstance(v, str):
        return "java.lang.String"
    if isinstance(v, dict):
        return "java.util.HashMap"
    if isinstance(v, list):
        return "java.util.ArrayList"
    return "java.lang.Object"


def jdouble(x: float) -> str:
    """``Double.toString``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        return s if "." in s else s + ".0"
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(text) + int(exp) - 1}"


def jstr(v: Any) -> str:
    """``String.valueOf``."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return jdouble(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{jstr(k)}={jstr(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(jstr(x) for x in v) + "]"
    return str(v)


def is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def equals(a: Any, b: Any) -> bool:
    """Painless ``==`` on ``def``: numbers by value (after promotion), anything else ``equals``."""
    if is_num(a) and is_num(b):
        return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equals(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equals(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def convert(v: Any, to: str) -> Any:
    """A declaration or cast to ``to``."""
    if (
        to in ("def", "Object")
        or v is None
        and to not in ("int", "long", "short", "byte", "double", "float", "boolean")
    ):
        return v
    if to in INTEGRAL or to in ("double", "float", "Double", "Number"):
        if not is_num(v):
            raise Throw("class_cast_exception", f"Cannot cast {jtype(v)} to {to}")
        if to in INTEGRAL:
            return (
                wrap64(int(v))
                if isinstance(v, int)
                else wrap64(int(math.trunc(v)))
                if math.isfinite(v)
                else 0
            )
        return float(v) if to != "Number" else v
    if to == "boolean":
        if not isinstance(v, bool):
            raise Throw("class_cast_exception", f"Cannot cast {jtype(v)} to boolean")
        return v
    kinds = {"String": str, "Map": dict, "HashMap": dict, "List": list, "ArrayList": list, "Collection": list}
    if not isinstance(v, kinds[to]):
        raise Throw("class_cast_exception", f"Cannot cast {jtype(v)} to {to}")
    return v


def arith(op: str, a: Any, b: Any) -> Any:
    if op == "+" and (isinstance(a, str) or isinstance(b, str)):
        return jstr(a) + jstr(b)
    if not (is_num(a) and is_num(b)):
        if a is None or b is None:
            raise Throw("null_pointer_exception", f"cannot apply [{op}] to a null value")
        raise Throw(
            "class_cast_exception", f"Cannot apply [{op}] operation to types [{jtype(a)}] and [{jtype(b)}]."
        )
    if isinstance(a, int) and isinstance(b, int):
        if op in ("/", "%") and b == 0:
            raise Throw("arithmetic_exception", "/ by zero")
        if op == "/":
            q = abs(a) // abs(b)
            return wrap64(q if (a >= 0) == (b >= 0) else -q)
        if op == "%":
            return int(math.fmod(a, b)) if abs(a) < 2**53 and abs(b) < 2**53 else a - b * int(a / b)
        return wrap64({"+": a + b, "-": a - b, "*": a * b}[op])
    x, y = float(a), float(b)
    if op == "/":
        if y == 0:
            return math.nan if x == 0 or math.isnan(x) else math.copysign(math.inf, x) * math.copysign(1, y)
        return x / y
    if op == "%":
        return math.nan if y == 0 or math.isinf(x) else math.fmod(x, y)
    return {"+": x + y, "-": x - y, "*": x * y}[op]


def compare(op: str, a: Any, b: Any) -> bool:
    if not (is_num(a) and is_num(b)):
        raise Throw(
            "class_cast_exception", f"Cannot apply [{op}] operation to types [{jtype(a)}] and [{jtype(b)}]."
        )
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def truth(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise Throw("class_cast_exception", f"Cannot cast {jtype(v)} to boolean ({what})")
    return v


def list_index(seq: list, i: Any) -> int:
    if not isinstance(i, int) or isinstance(i, bool):
        raise Throw("class_cast_exception", f"Cannot cast {jtype(i)} to int")
    j = i + len(seq) if i < 0 else i  # Painless: a negative list index counts from the end
    if not 0 <= j < len(seq):
        raise Throw("index_out_of_bounds_exception", f"Index {i} out of bounds for length {len(seq)}")
    return j


def default_value(kind: str) -> Any:
    return (
        0
        if kind in INTEGRAL
        else 0.0
        if kind in ("double", "float")
        else False
        if kind == "boolean"
        else None
    )


MISSING = object()


def sized(obj: dict | list, name: str) -> Any:
    if name == "size":
        return len(obj)
    if name == "isEmpty":
        return not obj
    obj.clear()
    return None


def string_method(s: str, name: str, args: list) -> Any:
    n = len(args)
    strs = all(isinstance(a, str) for a in args)
    if n == 0 and name in ("length", "toLowerCase", "toUpperCase", "trim", "isEmpty"):
        return {
            "length": lambda: len(s),
            "toLowerCase": s.lower,
            "toUpperCase": s.upper,
            "trim": lambda: s.strip("".join(chr(c) for c in range(33))),
            "isEmpty": lambda: not s,
        }[name]()
    if n == 1 and strs and name in ("contains", "startsWith", "endsWith", "indexOf"):
        a = args[0]
        return {
            "contains": a in s,
            "startsWith": s.startswith(a),
            "endsWith": s.endswith(a),
            "indexOf": s.find(a),
        }[name]
    if name == "replace" and n == 2 and strs:
        return s.replace(args[0], args[1])
    if (
        name == "substring"
        and n in (1, 2)
        and all(isinstance(a, int) and not isinstance(a, bool) for a in args)
    ):
        start, end = args[0], args[1] if n == 2 else len(s)
        if not 0 <= start <= end <= len(s):
            raise Throw("string_index_out_of_bounds_exception", f"begin {start}, end {end}, length {len(s)}")
        return s[start:end]
    return MISSING
