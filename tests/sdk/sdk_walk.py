"""The walk over an official SDK's request types that the `test_sdk_shapes*`
tests share: a type's members, the types a union or list may hold, the
smallest value a type allows, and the check that a request holding it
crosses the gateway.

A type is a `TypedDict` (OpenAI, Anthropic, google-genai's `*Dict`s), a
pydantic model (Cohere) or a botocore shape (Bedrock, walked from the
service model by `aws_value`); `value` makes the smallest instance of
any: required members only, the first choice of a union (a plain value
before a shape), a list of one.
"""

from __future__ import annotations

import collections.abc
import enum
import types
import typing
from typing import Any, Callable

import httpx
import typing_extensions as te

_WRAPPERS = (te.Required, te.NotRequired, typing.Required, typing.NotRequired, te.Annotated, typing.Annotated)
_UNIONS = (typing.Union, types.UnionType)


def unwrap(tp):
    """`tp` without `Required`, `NotRequired` and `Annotated` around it."""
    while te.get_origin(tp) in _WRAPPERS:
        tp = te.get_args(tp)[0]
    return tp


def is_model(tp) -> bool:
    """A pydantic model (Cohere's request types)."""
    return isinstance(tp, type) and hasattr(tp, "model_fields")


def hints(shape) -> dict:
    """A TypedDict's or a pydantic model's members and their types, by wire name."""
    if is_model(shape):
        return {(f.alias or name): unwrap(f.annotation) for name, f in shape.model_fields.items()}
    return {name: unwrap(tp) for name, tp in typing.get_type_hints(shape, include_extras=True).items()}


def required(shape) -> set[str]:
    """The members a value of `shape` must have (a model's `Literal`
    discriminators among them: they have defaults but say the type)."""
    if is_model(shape):
        return {(f.alias or name) for name, f in shape.model_fields.items()
                if f.is_required() or te.get_origin(unwrap(f.annotation)) is te.Literal}
    # `__required_keys__` misses `Required[...]` written as a string
    # annotation (the SDK's `from __future__ import annotations`).
    raw = typing.get_type_hints(shape, include_extras=True)
    if getattr(shape, "__total__", True):
        return {name for name, tp in raw.items() if te.get_origin(tp) not in (te.NotRequired, typing.NotRequired)}
    return {name for name, tp in raw.items() if te.get_origin(tp) in (te.Required, typing.Required)}


def options(tp) -> list:
    """The choices of a union (without None), else `[tp]`."""
    tp = unwrap(tp)
    if te.get_origin(tp) in _UNIONS:
        return [o for arg in te.get_args(tp) if arg is not type(None) for o in options(arg)]
    return [tp]


def items_of(tp):
    """The element type of an iterable type, else None."""
    origin = te.get_origin(tp)
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence, typing.Iterable, typing.List,
                  typing.Sequence):
        return unwrap(te.get_args(tp)[0])
    return None


def is_shape(tp) -> bool:
    return te.is_typeddict(tp) or is_model(tp)


def shapes(tp) -> list:
    """Every TypedDict or model a type may hold at its top (through unions and lists)."""
    found = []
    for option in options(tp):
        inner = items_of(option)
        if inner is not None:
            found += shapes(inner)
        elif is_shape(option):
            found.append(option)
    return found


def literal_of(shape, member: str):
    """The first value a `Literal` member says (a block's `type`, a message's `role`)."""
    tp = hints(shape).get(member)
    return te.get_args(tp)[0] if tp is not None and te.get_origin(tp) is te.Literal else None


def literals_of(shape, member: str) -> tuple:
    tp = hints(shape).get(member)
    return te.get_args(tp) if tp is not None and te.get_origin(tp) is te.Literal else ()


def by_literal(tp, member: str) -> dict[str, object]:
    """`member`'s value (`type`, `role`) → the shape that says it, for every shape `tp` may hold."""
    found: dict[str, object] = {}
    for shape in shapes(tp):
        for kind in literals_of(shape, member):
            found.setdefault(kind, shape)
    return found


def value(tp, depth: int = 0):
    """The smallest value of `tp`: required members only, first choices."""
    tp = unwrap(tp)
    if depth > 6:
        return {}
    origin = te.get_origin(tp)
    if origin is te.Literal:
        return te.get_args(tp)[0]
    if origin in _UNIONS:
        choices = options(tp)
        # A plain value first (a string for `str | TypedDict`), else the first shape.
        for simple in (str, int, float, bool):
            if simple in choices:
                return value(simple, depth + 1)
        return value(choices[0], depth + 1)
    inner = items_of(tp)
    if inner is not None:
        return [value(inner, depth + 1)]
    if origin in (dict, collections.abc.Mapping, typing.Dict) or tp in (dict, typing.Any):
        return {}
    if is_shape(tp):
        fields = hints(tp)
        return {name: value(fields[name], depth + 1) for name in sorted(required(tp))}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = [m.value for m in tp if "unspecified" not in str(m.value).lower()]
        return members[0] if members else next(iter(tp)).value
    return {str: "x", int: 1, float: 1.0, bool: True, bytes: b"x"}.get(tp, {})


def with_member(shape, member: str) -> dict:
    """The smallest value of `shape` with `member` set too."""
    body = value(shape)
    body[member] = value(hints(shape)[member])
    return body


# ------------------------------------------------------------- botocore


def aws_value(shape, depth: int = 0):
    """The smallest value of a botocore shape, as boto3 takes it: required
    members only; a union's first member."""
    kind = shape.type_name
    if depth > 8:
        return {}
    if kind == "structure":
        if shape.metadata.get("union"):
            name, member = next(iter(shape.members.items()))
            return {name: aws_value(member, depth + 1)}
        return {name: aws_value(shape.members[name], depth + 1) for name in shape.required_members}
    if kind == "list":
        return [aws_value(shape.member, depth + 1)]
    if kind == "map":
        return {}
    if kind == "string":
        return shape.enum[0] if shape.enum else "x"
    if kind in ("integer", "long"):
        return max(1, int(shape.metadata.get("min", 1)))
    if kind in ("float", "double"):
        return 1.0 if shape.metadata.get("max", 1) >= 1 else 0.5
    if kind == "boolean":
        return True
    if kind == "blob":
        return b"x"
    if kind == "timestamp":
        return 0
    return {}  # a document: any JSON


def aws_with_member(shape, member: str) -> dict:
    """The smallest value of a structure with `member` set too (for a union, `member` alone)."""
    if shape.metadata.get("union"):
        return {member: aws_value(shape.members[member])}
    body = aws_value(shape)
    body[member] = aws_value(shape.members[member])
    return body


# ---------------------------------------------------------------- check


def dropped(headers) -> list[str]:
    """The paths `x-switchyard-dropped` names."""
    header = headers.get("x-switchyard-dropped", "")
    return [path.strip() for path in header.split(",") if path.strip()]


Send = Callable[[str, Any], httpx.Response]


def check(send: Send, body: Any, what: str, reported_as: str | None, same: str, cross: str):
    """200 from a lane of the caller's protocol (`same`) and from one of
    another (`cross`); with `reported_as`, the cross lane's
    `x-switchyard-dropped` names a path under it."""
    answer = send(same, body)
    assert answer.status_code == 200, f"{what}: the {same} lane answered {answer.status_code} {answer.text[:500]}"
    answer = send(cross, body)
    assert answer.status_code == 200, f"{what}: the {cross} lane answered {answer.status_code} {answer.text[:500]}"
    if reported_as is not None:
        paths = dropped(answer.headers)
        assert any(p == reported_as or p.startswith(reported_as + ".") for p in paths), \
            f"{what} is neither modelled nor reported: x-switchyard-dropped = {paths}"
