"""TOML -> frozen dataclasses: the one converter every recipe, toolchain and data file is read with.

The dataclass is the schema: a TOML key is the field of the same name, its type is the field's
type, a field without a default is required. Anything unknown or mistyped is refused with the
file, the dotted key and a fix, raised as the caller's error class (RecipeError for what users
write, DataError for ortdist's own data), so exit codes say whose file is wrong.

Types understood: str, bool, int, float (an int is accepted), Literal[...] of strings,
tuple[X, ...] (a TOML list), Mapping[str, X] (a read-only table) and dict[str, X], ``X | None``,
and nested dataclasses. A table of named entries (``[<name>]`` sections) reads into
``Mapping[str, D]``, or ``tuple[D, ...]`` in file order, where D marks one field with ``KEY``:
that field takes the entry's name and is not a key of its own. TOML keys that are not Python
identifiers (triples, versions, distribution names) are always such names, never fields.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, TypeVar

from .errors import OrtdistError

T = TypeVar("T")

# Field metadata: the field is the name of the table entry it sits under (see the module docstring).
KEY: Mapping[str, bool] = types.MappingProxyType({"ortdist.config.key": True})
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_LAST_KEY = re.compile(r'("[^"]*"|[^."]+)$')


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else ""


def dotted(prefix: str, key: str) -> str:
    """``prefix.key`` in TOML's spelling: keys that are not bare (versions, say) are quoted."""
    part = key if _BARE_KEY.match(key) else f'"{key}"'
    return f"{prefix}.{part}" if prefix else part


def where(origin: str, key: str) -> str:
    """How every error names its place: the file, and the dotted key in it."""
    return f"{origin} key '{key}'" if key else origin


def parse_toml(text: str, origin: str, error: type[OrtdistError]) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"not valid TOML: {exc}", where=origin, fix="fix the TOML syntax at that line") from exc


def read_toml(
    path: Path | Traversable,
    error: type[OrtdistError],
    *,
    origin: str = "",
    unreadable_fix: str = "check that the file exists and is readable",
) -> dict[str, Any]:
    """The file's table; unreadable, non-UTF-8 or invalid TOML is ``error`` naming the file."""
    origin = origin or str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read the file: {exc.strerror or exc}", where=origin, fix=unreadable_fix) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text (byte {exc.start} is {raw[exc.start : exc.start + 1]!r})",
            where=origin,
            fix="TOML files are UTF-8: re-save the file as UTF-8",
        ) from exc
    return parse_toml(text, origin, error)


@dataclasses.dataclass(frozen=True)
class _Context:
    origin: str
    error: type[OrtdistError]

    def fail(self, message: str, key: str, fix: str) -> OrtdistError:
        return self.error(message, where=where(self.origin, key), fix=fix)


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _record(hint: Any) -> type | None:
    """``hint`` if it is a dataclass (a TOML table of fixed keys), else None."""
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _key_field(cls: type | None) -> str | None:
    if cls is None:
        return None
    names = [f.name for f in dataclasses.fields(cls) if f.metadata.get("ortdist.config.key")]
    return names[0] if names else None


def _line(key: str, rhs: str) -> str:
    """``name = rhs`` for the last part of ``key``; just ``rhs`` for a list item."""
    if key.endswith("]"):
        return rhs
    match = _LAST_KEY.search(key)
    return f"{match.group(1) if match else 'key'} = {rhs}"


def _example(hint: Any, key: str) -> str:
    """A line of TOML that would satisfy ``hint``, for a fix."""
    origin = typing.get_origin(hint)
    if _record(hint) or origin in (Mapping, dict):
        return f"[{key}]"
    if origin is Literal:
        return _line(key, f'"{typing.get_args(hint)[0]}"')
    if origin is tuple:
        return _line(key, "[...]")
    return _line(key, {bool: "true", int: "1", float: "1.0"}.get(hint, '"..."'))


_TYPE_NAMES = {bool: "a boolean", str: "a string", int: "an integer", float: "a float", list: "a list", dict: "a table"}


def _type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _got(value: Any) -> str:
    """What the file has, in TOML's spelling for booleans."""
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    return f"got {_type_name(value)} {shown}"


def _convert(hint: Any, value: Any, ctx: _Context, key: str) -> Any:
    """``value`` checked against ``hint``: lists become tuples, tables dataclasses or read-only mappings."""
    origin = typing.get_origin(hint)
    record = _record(hint)
    if record:
        return _dataclass(record, value, ctx, key)
    if origin in (types.UnionType, typing.Union):
        arms = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(arms) != 1:
            raise TypeError(f"only X | None unions are supported, not {hint!r}")
        return _convert(arms[0], value, ctx, key)
    if origin is Literal:
        allowed = typing.get_args(hint)
        if not any(value == a and type(value) is type(a) for a in allowed):
            choices = ", ".join(repr(a) for a in allowed)
            hint_text = did_you_mean(str(value), [str(a) for a in allowed])
            raise ctx.fail(f"{value!r} is not one of {choices}", key, hint_text or f"use one of {list(allowed)}")
        return value
    if origin is tuple:
        return _tuple(hint, value, ctx, key)
    if origin in (Mapping, dict):
        return _mapping(hint, value, ctx, key)
    return _scalar(hint, value, ctx, key)


def _scalar(hint: Any, value: Any, ctx: _Context, key: str) -> Any:
    if hint is str:
        if not isinstance(value, str):
            shown = str(value).upper() if isinstance(value, bool) else value
            quoted = isinstance(value, bool | int | float)
            fix = "quote it: " + _line(key, f'"{shown}"') if quoted else "write a string: " + _line(key, '"..."')
            raise ctx.fail(f"must be a string, {_got(value)}", key, fix)
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ctx.fail(f"must be true or false, {_got(value)}", key, f"write {_line(key, 'true')} or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ctx.fail(f"must be a whole number, {_got(value)}", key, "write it without quotes: " + _line(key, "1"))
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ctx.fail(f"must be a number, {_got(value)}", key, "write it without quotes: " + _line(key, "0.5"))
        return float(value)
    raise TypeError(f"no TOML conversion for {hint!r} (key {key!r})")


def _tuple(hint: Any, value: Any, ctx: _Context, key: str) -> tuple[Any, ...]:
    args = typing.get_args(hint)
    if len(args) != 2 or args[1] is not Ellipsis:
        raise TypeError(f"only tuple[X, ...] is supported, not {hint!r}")
    item, record = args[0], _record(args[0])
    if record and _key_field(record):
        if not isinstance(value, dict):
            fix = f"write each entry as a table [{key}.<name>]"
            raise ctx.fail(f"must be a table of named entries, {_got(value)}", key, fix)
        return tuple(_entries(record, value, ctx, key).values())
    if not isinstance(value, list):
        fix = "make it a list: " + _line(key, "[...]")
        raise ctx.fail(f"must be a list, {_got(value)}", key, fix)
    return tuple(_convert(item, v, ctx, f"{key}[{i}]") for i, v in enumerate(value))


def _mapping(hint: Any, value: Any, ctx: _Context, key: str) -> Mapping[str, Any]:
    key_type, item = typing.get_args(hint) or (str, str)
    if key_type is not str:
        raise TypeError(f"TOML keys are strings, not {key_type!r}")
    if not isinstance(value, dict):
        raise ctx.fail(f"must be a table, {_got(value)}", key, f"make it a table: [{key}]")
    record = _record(item)
    if record and _key_field(record):
        out: dict[str, Any] = _entries(record, value, ctx, key)
    else:
        out = {k: _convert(item, v, ctx, dotted(key, k)) for k, v in value.items()}
    return out if typing.get_origin(hint) is dict else types.MappingProxyType(out)


def _entries(cls: type[T], table: dict[str, Any], ctx: _Context, key: str) -> dict[str, T]:
    """A table of named entries, each a ``cls`` whose KEY field is the entry's name."""
    out: dict[str, T] = {}
    for name, entry in table.items():
        out[name] = _dataclass(cls, entry, ctx, dotted(key, name), name)
    return out


def _fields(cls: type, data: Any, ctx: _Context, key: str) -> dict[str, Any]:
    """The table's keys converted to ``cls``'s fields; unknown keys are refused, missing ones left out."""
    if not isinstance(data, dict):
        raise ctx.fail(f"must be a table, {_got(data)}", key, f"make it a table: [{key or '...'}]")
    keyed = _key_field(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name != keyed}
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        path = dotted(key, name)
        if name not in fields:
            fix = did_you_mean(name, fields) or f"allowed keys: {', '.join(sorted(fields))}"
            raise ctx.fail(f"unknown key '{name}'", path, fix)
        kwargs[name] = _convert(hints[name], value, ctx, path)
    return kwargs


def _dataclass(cls: type[T], data: Any, ctx: _Context, key: str, name: str | None = None) -> T:
    kwargs = _fields(cls, data, ctx, key)
    keyed = _key_field(cls)
    if keyed is not None:
        if name is None:
            raise TypeError(f"{cls.__name__} is read from a table of named entries only")
        kwargs[keyed] = name
    return construct(cls, kwargs, origin=ctx.origin, error=ctx.error, key=key)


def construct(cls: type[T], kwargs: dict[str, Any], *, origin: str, error: type[OrtdistError], key: str = "") -> T:
    """``cls(**kwargs)`` from converted fields, naming the required ones that are missing."""
    missing = [
        f.name
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if f.init
        and f.name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        line = _example(_hints(typing.cast(Any, cls))[missing[0]], dotted(key, missing[0]))
        place = f"under [{key}]" if key else "at the top of the file"
        raise error(f"missing required key(s) {missing}", where=where(origin, key), fix=f"add {line} {place}")
    return cls(**kwargs)


def convert(cls: type[T], data: Any, *, origin: str, error: type[OrtdistError], key: str = "") -> T:
    """A TOML table as the dataclass ``cls``; ``origin`` names the file, ``key`` the table in it."""
    return _dataclass(cls, data, _Context(origin, error), key)


def convert_fields(cls: type, data: Any, *, origin: str, error: type[OrtdistError]) -> dict[str, Any]:
    """The keys a table sets, checked and converted as ``cls``'s fields, without demanding the
    required ones: for a file that only adds to another (a toolchain that ``extends`` one)."""
    return _fields(cls, data, _Context(origin, error), "")


def convert_table(cls: type[T], data: Any, *, origin: str, error: type[OrtdistError], key: str = "") -> dict[str, T]:
    """A table of named entries (``[<name>]`` sections), each a ``cls`` (whose KEY field, if any, is its name)."""
    ctx = _Context(origin, error)
    if not isinstance(data, dict):
        raise ctx.fail(f"must be a table, {_got(data)}", key, f"make it a table: [{key}]")
    if _key_field(cls) is None:
        return {name: _dataclass(cls, entry, ctx, dotted(key, name)) for name, entry in data.items()}
    return _entries(cls, data, ctx, key)


def load(path: Path | Traversable, cls: type[T], error: type[OrtdistError], *, origin: str = "") -> T:
    """Read a TOML file as the dataclass ``cls``."""
    origin = origin or str(path)
    return convert(cls, read_toml(path, error, origin=origin), origin=origin, error=error)
