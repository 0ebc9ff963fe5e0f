"""The one place flags are declared and parsed: a frozen config dataclass's fields become a
command's flags, and the parsed command line becomes the dataclass.

Each field's metadata (agents/core/config.py `setting`) gives its help, its parser (a string to
the value, ValueError saying why not) and, by default, its names: the flag `--<name>` (a bool
that defaults to True is turned off by `--no-<name>`), the environment variable `VTP_<FLAG>`
(the flag's name, upper case); `env=None` for none. Precedence: flag > environment > the field's
default, the one place a default is defined. A nested dataclass field (the agent's
`AgentConfig`, the data fetch's `FetchConfig`) adds its own fields. A repeatable setting (a
tuple) takes its flag many times, or a comma-separated variable. Every problem found is reported
at once, one line each naming the flag and what was given, as one ConfigError.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from agents.core.config import ConfigError, bounded

T = TypeVar("T")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclasses.dataclass(frozen=True)
class Option:
    """One field as the command line offers it."""

    name: str  # the field's
    flag: str  # --flag, or the positional's name
    env: str | None
    kind: type  # bool, tuple (repeatable) or the value's type
    parse: Callable[[str], Any]
    meta: Mapping[str, Any]
    default: Any

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def positional(self) -> bool:
        return bool(self.meta.get("positional"))

    @property
    def negates(self) -> bool:
        return self.kind is bool and self.default is True


def _base(t: Any) -> Any:
    """X of `X | None`."""
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return t


#: A field's parser when its metadata names none, by its type (a string otherwise).
_PARSERS: dict[Any, Callable[[str], Any]] = {
    int: bounded(int, "a whole number", lambda n: True),
    float: bounded(float, "a number", lambda x: True),
    Path: Path,
}


def options(cls: type) -> list[Option]:
    """Every settable field of `cls` and of its nested config dataclasses, in field order."""
    out: list[Option] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        t = _base(hints[f.name])
        if dataclasses.is_dataclass(t):
            out += options(t)
        elif "help" in f.metadata:  # else: not settable from the command line
            out.append(_option(f, t))
    return out


def _option(f: dataclasses.Field, t: Any) -> Option:
    """Field `f` (of type `t`) as the command line offers it."""
    meta = f.metadata
    default = f.default
    if typing.get_origin(t) is tuple:
        kind: type = tuple
        elem = typing.get_args(t)[0]
    elif t is bool:
        kind, elem = bool, bool
    else:
        kind, elem = t, t
    if meta.get("positional"):
        flag = f.name
    elif meta.get("flag"):
        flag = meta["flag"]
    else:
        flag = "--" + ("no-" if kind is bool and default is True else "") + f.name.replace("_", "-")
    env = meta.get("env", "")
    if env == "":
        env = "VTP_" + flag.lstrip("-").replace("-", "_").upper()
    parse = meta.get("parse") or _PARSERS.get(elem, str)
    return Option(f.name, flag, env, kind, parse, meta, default)


def add_options(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """`cls`'s settings as `parser`'s arguments (every default None: `build` fills them)."""
    for o in options(cls):
        if o.name in skip:
            continue
        help_text = o.meta["help"]
        shown = o.meta.get("default", o.default)
        hidden = shown is None or isinstance(shown, bool) or shown in ((), dataclasses.MISSING)
        if not hidden and "(default" not in help_text:
            help_text += f" (default: {shown})"
        if o.env:
            help_text += f" [{o.env}]"
        help_text = help_text.replace("%", "%%")
        if o.positional:
            kw: dict[str, Any] = {"help": help_text}
            for k in ("choices", "nargs", "metavar"):
                if k in o.meta:
                    kw[k] = o.meta[k]
            parser.add_argument(o.flag, **kw)
            continue
        kw = {"dest": o.dest, "default": None, "help": help_text}
        if o.kind is bool:
            kw["action"] = "store_false" if o.negates else "store_true"
        else:
            kw["metavar"] = o.meta.get("metavar")
            if o.kind is tuple:
                kw["action"] = "append"
            if "choices" in o.meta:
                kw["choices"] = o.meta["choices"]
        if o.default is dataclasses.MISSING and o.env is None:
            kw["required"] = True
        parser.add_argument(o.flag, **kw)


def build(
    cls: type[T], ns: argparse.Namespace, env: Mapping[str, str] | None = None, **given: Any
) -> T:
    """The frozen `cls` of a parsed command line: each field from its flag, else its
    environment variable, else its default; `given` sets fields outright (a command's own).
    ConfigError lists every problem."""
    problems: list[str] = []
    out = _build(cls, ns, os.environ if env is None else env, given, problems)
    if problems:
        raise ConfigError(problems)
    return out


def _build(cls: type, ns: argparse.Namespace, env: Mapping[str, str], given: dict[str, Any],
           problems: list[str]) -> Any:  # fmt: skip
    values: dict[str, Any] = {}
    before = len(problems)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        t = _base(hints[f.name])
        if f.name in given:
            values[f.name] = given[f.name]
            continue
        if dataclasses.is_dataclass(t):
            values[f.name] = _build(t, ns, env, {}, problems)
            continue
        if "help" not in f.metadata:
            continue
        got = _value(_option(f, t), ns, env, problems)
        if got is not _UNSET:
            values[f.name] = got
    if len(problems) > before:
        return None
    return cls(**values)


_UNSET = object()


def _value(o: Option, ns: argparse.Namespace, env: Mapping[str, str], problems: list[str]) -> Any:
    """The field's value from its flag or variable (_UNSET: neither; its default applies)."""
    raw, origin = getattr(ns, o.dest, None), o.flag
    if raw is None and o.env and env.get(o.env, "").strip():
        raw, origin = env[o.env].strip(), o.env
        if o.kind is bool:
            if raw.lower() not in _TRUE + _FALSE:
                problems.append(f"{o.dest} ({origin}={raw[:60]!r}): expected 1 or 0")
                return _UNSET
            given = raw.lower() in _TRUE
            return (not given) if o.negates else given
        if o.kind is tuple:
            raw = [part for part in raw.split(",") if part.strip()]
    if raw is None:
        if o.default is dataclasses.MISSING:
            where = f" or set {o.env}" if o.env else ""
            problems.append(f"{o.dest}: required; pass {o.flag}{where}")
        return _UNSET
    if o.kind is bool:
        return raw
    items = raw if o.kind is tuple else [raw]
    parsed = []
    for item in items:
        try:
            parsed.append(o.parse(str(item)))
        except ValueError as exc:
            problems.append(f"{o.dest} ({origin}={str(item)[:60]!r}): {exc}")
            return _UNSET
    return tuple(parsed) if o.kind is tuple else parsed[0]
