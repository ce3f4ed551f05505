"""Field types shared by the input-record schemas, and the mapping of schema errors to InputError.

Each format module validates a raw JSON record against a small pydantic schema; a failure becomes
one InputError naming the field path, the offending value and the fix. Keys a schema does not
read are not an error (real files carry metadata we do not index) but never pass unseen:
:func:`unknown_keys` names them and the reader reports them once per file.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, TypeVar, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from scholar_es.errors import InputError

Record = TypeVar("Record", bound=BaseModel)
ItemT = TypeVar("ItemT")

_EXPECTED = {
    "string_type": "expected a string",
    "list_type": "expected a list",
    "dict_type": "expected a JSON object",
    "model_type": "expected a JSON object",
    "model_attributes_type": "expected a JSON object",
    "literal_error": "expected one of the listed values",
}


class RawRecord(BaseModel):
    """Base of the raw-record schemas: permissive about unknown keys, strict about types."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    #: Keys the format documents and deliberately does not index (never reported as unknown).
    NOT_INDEXED: ClassVar[frozenset[str]] = frozenset()


def _nested_schema(annotation: Any) -> type[RawRecord] | None:
    """The record schema inside a field's type (``ListOf[Section] | None`` -> ``Section``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, RawRecord):
        return annotation
    for arg in get_args(annotation):
        found = _nested_schema(arg)
        if found is not None:
            return found
    return None


def unknown_keys(schema: type[RawRecord], record: dict[str, Any], prefix: str = "") -> set[str]:
    """The paths of the keys of ``record`` that ``schema`` does not read, nested objects included:
    ``{"sections": [{"section_name": ...}]}`` against our format gives ``{"sections[].section_name"}``."""
    by_key = {info.alias or name: info for name, info in schema.model_fields.items()}
    out: set[str] = set()
    for key, value in record.items():
        info = by_key.get(key)
        if info is None:
            if key not in schema.NOT_INDEXED:
                out.add(prefix + key)
            continue
        nested = _nested_schema(info.annotation)
        if nested is None:
            continue
        if isinstance(value, dict):
            out |= unknown_keys(nested, value, f"{prefix}{key}.")
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    out |= unknown_keys(nested, item, f"{prefix}{key}[].")
    return out


def _paper_id(value: Any) -> Any:
    # Numeric ids (PubMed ids, BEIR corpora written by pandas) are common; accept them as text.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(
            f"expected the paper id as a string, got {_show(value)}; write the id as a JSON string"
        )
    if not value.strip():
        raise ValueError(f"the paper id is empty ({value!r}); give every record a unique, non-empty id")
    return value.strip()


def _year(value: Any) -> Any:
    # Some sources (PubMedQA) store the year as a string; "2011" is fine, "abc" and true are not.
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ValueError(f"expected a year such as 2019, got {_show(value)}; fix it or remove the field")


def _text(value: Any) -> Any:
    # null counts as absent: several data sets write null for a missing title or heading.
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {_show(value)}; fix the value or remove the field")
    return value


def _list(value: Any) -> Any:
    return [] if value is None else value  # null list = no items, like a missing key


PaperId = Annotated[str, BeforeValidator(_paper_id)]
#: A list that may also be null or absent (both read as empty).
ListOf = Annotated[list[ItemT], BeforeValidator(_list)]
Year = Annotated[int | None, BeforeValidator(_year)]
Text = Annotated[str, BeforeValidator(_text)]


def parse(schema: type[Record], record: dict[str, Any]) -> Record:
    """Validate ``record`` against ``schema``; the first problem becomes a located InputError."""
    try:
        return schema.model_validate(record)
    except ValidationError as exc:
        raise to_input_error(exc) from None


def to_input_error(exc: ValidationError) -> InputError:
    error = exc.errors(include_url=False)[0]
    field = field_path(error["loc"])
    if error["type"] == "missing":
        return InputError(f"required field {field!r} is missing; add it to the record", field=field)
    if error["type"] == "value_error":
        # Our own validators already wrote the whole message (value and fix included).
        return InputError(str(error["ctx"]["error"]), field=field)
    expected = _EXPECTED.get(error["type"], error["msg"][0].lower() + error["msg"][1:])
    if error["type"] == "literal_error":
        expected = "expected " + error["ctx"]["expected"]
    return InputError(
        f"{expected}, got {_show(error.get('input'))}; fix the value or remove the field", field=field
    )


def field_path(loc: tuple[int | str, ...]) -> str:
    """``("sections", 0, "paragraphs")`` -> ``"sections[0].paragraphs"``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
