"""Settings as a user types them: config fields parsed by their declared type, checked, and described.

Every algorithm's config dataclass ends with ``__post_init__`` calling :func:`check_fields`: each field must have its
declared type (``float``, ``int``, ``bool``, ``tuple[int, ...]``, ``Literal[...]``, ``... | None``; a list becomes a
tuple) and then pass its rule, e.g. ``gamma=interval("[0, 1)")``. The command line reads ``--set NAME=VALUE`` with
:func:`parse_field`, by the same declared types, so ``normalize_states=False`` is ``False`` and ``reward_scale=None``
is ``None``; ``--config FILE`` reads the same fields from a TOML file (:func:`read_settings_file`). Every mistake
raises :class:`UserError`, which ``python -m minirl`` prints on one line before exiting with status 2;
:func:`at_least` and :func:`check_writable` are the checks of a count and of an output folder that the run planner,
the evaluation and the command line share.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import numbers
import os
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal


class UserError(ValueError):
    """What the user asked for is wrong (a setting, a name, a file): ``python -m minirl`` prints the message on one
    line and exits with status 2. Any other exception is a bug and keeps its traceback."""


def did_you_mean(name: str, options) -> str:
    """``" (did you mean 'iql'?)"`` for the option nearest to ``name``; else the options of which ``name`` is a
    whole ``_``-separated part (``lr`` on IQL: ``" (did you mean 'actor_lr', 'critic_lr' or 'value_lr'?)"``);
    ``""`` when none is near."""
    options = [str(o) for o in options]
    close = difflib.get_close_matches(str(name), options, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    parts = [o for o in options if str(name) and str(name) in o.split("_")]
    if not parts:
        return ""
    listed = ", ".join(map(repr, parts[:-1])) + f" or {parts[-1]!r}" if len(parts) > 1 else repr(parts[0])
    return f" (did you mean {listed}?)"


# ----------------------------------------------------------------------------------------------------------------
# Rules: what a field's value must satisfy beyond its type
# ----------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    ok: Callable[[Any], bool]
    expected: str          # completes "<Config>.<field> must be ..."


def interval(text: str) -> Rule:
    """A number in an interval written as in maths: ``"[0, 1)"``, ``"(0, inf)"`` (printed ``> 0``)."""
    m = re.fullmatch(r"([\[(])\s*([^,\s]+)\s*,\s*([^\s\])]+)\s*([\])])", text)
    if m is None:
        raise ValueError(f"interval must look like '[0, 1)', got {text!r}")
    lo_closed, lo, hi, hi_closed = m[1] == "[", float(m[2]), float(m[3]), m[4] == "]"

    def ok(v) -> bool:
        return (v >= lo if lo_closed else v > lo) and (v <= hi if hi_closed else v < hi)
    if math.isinf(hi):
        return Rule(ok, f"{'>=' if lo_closed else '>'} {m[2]}")
    return Rule(ok, f"in {text}")


def or_none(rule: Rule) -> Rule:
    """``rule``, or the value None."""
    return Rule(lambda v: v is None or rule.ok(v), f"None or {rule.expected}")


POSITIVE, NON_NEGATIVE, AT_LEAST_ONE = interval("(0, inf)"), interval("[0, inf)"), interval("[1, inf)")
LAYERS = Rule(lambda v: len(v) > 0 and all(x >= 1 for x in v), "a non-empty list of layer sizes >= 1")


def check_fields(config, **rules: Rule) -> None:
    """Check every field of the dataclass ``config`` against its declared type (a list becomes a tuple), then each
    field named in ``rules`` against its rule. Raises :class:`UserError` naming the field, what is expected and what
    it got."""
    cls = type(config)
    hints = field_types(cls)
    for f in dataclasses.fields(cls):
        value, tp = getattr(config, f.name), hints[f.name]
        if isinstance(value, list) and _origin(tp) is tuple:
            value = tuple(value)
            setattr(config, f.name, value)
        if not _has_type(value, tp):
            raise UserError(f"{cls.__name__}.{f.name} must be {describe(tp)}, got {value!r}")
    for name, rule in rules.items():
        if not rule.ok(getattr(config, name)):
            raise UserError(f"{cls.__name__}.{name} must be {rule.expected}, got {getattr(config, name)!r}")


# ----------------------------------------------------------------------------------------------------------------
# Types: check a value, parse a text, describe for a person
# ----------------------------------------------------------------------------------------------------------------

def field_types(cls) -> dict[str, Any]:
    """Each field's declared type (the annotations evaluated in the config's module)."""
    return typing.get_type_hints(cls)


def _origin(tp):
    return typing.get_origin(tp) or tp


def _optional(tp):
    """``(T, True)`` for ``T | None``, ``(tp, False)`` otherwise."""
    if _origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _is_bool(v) -> bool:
    return isinstance(v, bool) or type(v).__name__ == "bool_"  # numpy's bool too


def _has_type(value, tp) -> bool:
    tp, optional = _optional(tp)
    if value is None:
        return optional
    if _origin(tp) is Literal:
        return value in typing.get_args(tp)
    if tp is bool:
        return _is_bool(value)
    if tp is int:
        return isinstance(value, numbers.Integral) and not _is_bool(value)
    if tp is float:
        return isinstance(value, numbers.Real) and not _is_bool(value) and math.isfinite(value)
    if _origin(tp) is tuple:
        item = (typing.get_args(tp) or (Any,))[0]
        return isinstance(value, tuple) and (item is Any or all(_has_type(v, item) for v in value))
    return isinstance(value, tp)


def describe(tp) -> str:
    """What a value of type ``tp`` looks like, for an error message: ``"a number"``, ``"None or 'return_range'"``."""
    tp, optional = _optional(tp)
    if _origin(tp) is Literal:
        choices = [repr(c) for c in typing.get_args(tp)]
        text = " or ".join(choices) if len(choices) <= 2 else "one of " + ", ".join(choices)
    else:
        text = {bool: "true or false", int: "an integer", float: "a finite number", str: "a text"}.get(tp)
        if _origin(tp) is tuple:
            text = "a list of integers such as [256,256]"
    return f"None or {text}" if optional else text


def type_name(tp) -> str:
    """A short name of ``tp`` for ``--help``: ``float``, ``int``, ``bool``, ``[int,...]``, ``a|b``, ``...|None``."""
    tp, optional = _optional(tp)
    if _origin(tp) is Literal:
        name = "|".join(map(str, typing.get_args(tp)))
    elif _origin(tp) is tuple:
        name = "[int,...]"
    else:
        name = getattr(tp, "__name__", str(tp))
    return f"{name}|None" if optional else name


_BOOLS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


def parse_value(tp, text: str):
    """The value ``text`` stands for as type ``tp``; raises ``ValueError`` saying what was expected."""
    declared = tp
    tp, optional = _optional(tp)
    t = text.strip()
    if optional and t.lower() in ("none", "null"):
        return None
    try:
        if _origin(tp) is Literal:
            if t in typing.get_args(tp):
                return t
        elif tp is bool:
            return _BOOLS[t.lower()]
        elif tp is int:
            if re.fullmatch(r"[+-]?\d[\d_]*", t):
                return int(t)
            if re.fullmatch(r"[+-]?\d+(\.\d*)?[eE]\+?\d+", t) and float(t).is_integer():  # 1e6
                return int(float(t))
        elif tp is float:
            value = float(t)
            if math.isfinite(value):
                return value
        elif _origin(tp) is tuple:
            inner = t[1:-1] if t[:1] + t[-1:] in ("[]", "()") else t
            if inner != t or "," in t:
                item = (typing.get_args(tp) or (int,))[0]
                return tuple(parse_value(item, x) for x in inner.split(",") if x.strip())
        elif tp is str:
            return t
    except (KeyError, ValueError):
        pass
    near = did_you_mean(t, typing.get_args(tp)) if _origin(tp) is Literal else ""
    raise ValueError(f"expected {describe(declared)}, got {text!r}{near}")


def parse_field(cls, name: str, text: str):
    """The value of field ``name`` of config class ``cls`` written as ``text`` (``--set name=text``)."""
    hints = field_types(cls)
    if name not in hints:
        raise UserError(f"--set {name}={text}: {cls.__name__} has no field {name!r}{did_you_mean(name, hints)}; "
                        f"its fields: {', '.join(hints)}")
    try:
        return parse_value(hints[name], text)
    except ValueError as e:
        raise UserError(f"--set {name}={text}: {cls.__name__}.{name} {e}") from None


def file_value(tp, value):
    """A value read from a settings file (TOML's values are typed already) as type ``tp``: the same values as
    :func:`parse_value` takes written as text, but typed (``hidden = [256, 256]``, ``normalize_states = false``; the
    text ``"none"`` for None, which TOML cannot write); raises ``ValueError`` saying what was expected."""
    declared = tp
    tp, optional = _optional(tp)
    if optional and isinstance(value, str) and value.strip().lower() in ("none", "null"):
        return None
    if _origin(tp) is tuple and isinstance(value, list):
        value = tuple(value)
    if tp is float and isinstance(value, int) and not _is_bool(value):
        value = float(value)
    if value is not None and _has_type(value, tp):
        return value
    near = did_you_mean(value, typing.get_args(tp)) if _origin(tp) is Literal and isinstance(value, str) else ""
    shown = list(value) if isinstance(value, tuple) else value
    raise ValueError(f"expected {describe(declared)}, got {shown!r}{near}")


def read_settings_file(cls, path) -> dict:
    """The fields of config class ``cls`` set in the TOML file ``path`` (``train --config FILE``): the fields
    ``--set`` takes, each checked by its declared type (:func:`file_value`); a mistake is a :class:`UserError` that
    names the file and the field."""
    import sys
    where = f"--config {path}"
    if sys.version_info < (3, 11):
        raise UserError(f"{where}: reading a TOML file needs Python 3.11 or later (tomllib); use --set on "
                        f"{sys.version.split()[0]}")
    import tomllib
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError:
        raise UserError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{where}: a directory, expected a TOML file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{where}: not a TOML file ({e})") from None
    hints, out = field_types(cls), {}
    for name, value in table.items():
        if name not in hints:
            raise UserError(f"{where}: {cls.__name__} has no field {name!r}{did_you_mean(name, hints)}; its fields: "
                            f"{', '.join(hints)}")
        try:
            out[name] = file_value(hints[name], value)
        except ValueError as e:
            raise UserError(f"{where}: {name} = {value!r}: {cls.__name__}.{name} {e}") from None
    return out


def field_docs(cls) -> list[tuple[str, str, Any, str]]:
    """``(name, type name, default, comment)`` for every field of ``cls``; the comment is the one after the field's
    line in the source (what ``train --help`` prints)."""
    comments = {}
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+)\s*:[^#]*?#\s*(.*)$", line)
        if m:
            comments[m[1]] = m[2]
    hints = field_types(cls)
    return [(f.name, type_name(hints[f.name]), f.default, comments.get(f.name, "")) for f in dataclasses.fields(cls)]


def at_least(name: str, value, low: int) -> int:
    """``value`` if it is an integer >= ``low``; a :class:`UserError` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise UserError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_writable(path: Path, what: str) -> None:
    """``path`` is a directory that exists or can be made, and can be written to."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{what}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{what}: {existing} is not writable")
