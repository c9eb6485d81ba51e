"""What a model column can hold: values from a source are checked against their columns before any write.

PostgreSQL refuses text longer than its column or holding a NUL, and an integer past its column's range, and the
error aborts the whole transaction: one broken object would cost its node's readings or the cluster's inventory.
SQLite would store them. A lone surrogate (from JSON's "\\ud800") cannot be encoded for either. So both databases
get PostgreSQL's limits, checked here — by the inventory writes (apps/clusters/inventory.py) and the readings
ingest (apps/telemetry/ingest.py).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from apps.words import excerpt, printable

from .names import name_problem

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)

_INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges
_Info = TypeVar("_Info", bound="DataclassInstance")
# Per kind of value: (attribute, its column, whether an unstorable value refuses the whole object, the column's
# length and integer range — kept here for the common case, checked without a call — and the Kubernetes name rule
# it follows, if any: apps/clusters/names.py).
ColumnSpec = tuple[str, models.Field, bool, int, tuple[int, int], str | None]
ColumnSpecs = tuple[ColumnSpec, ...]
_NO_RANGE = (-(2**63), 2**63 - 1)


def model_column(model: type[models.Model], name: str) -> models.Field:
    column = model._meta.get_field(name)
    if not isinstance(column, models.Field):
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return column


def column_specs(
    model: type[models.Model], attributes: Iterable[str], identity: Iterable[str], rules: dict[str, str] | None = None
) -> ColumnSpecs:
    """The specs of `model`'s columns named `attributes`; those in `identity` name the object; `rules` maps an
    attribute to the kind of Kubernetes name it must be."""
    names_it, rules = set(identity), rules or {}
    return tuple(column_spec(name, model_column(model, name), name in names_it, rules.get(name)) for name in attributes)


def column_spec(name: str, column: models.Field, names_it: bool, rule: str | None = None) -> ColumnSpec:
    bounds = _INTEGER_RANGES.get(column.get_internal_type(), _NO_RANGE)
    return (name, column, names_it, column.max_length or 2**63, bounds, rule)


def unstorable(value: Any, column: models.Field) -> str | None:
    """Why `value` cannot be written to `column` on PostgreSQL (and so is not written on SQLite either), or None.

    Text: longer than the column, a NUL character, a lone surrogate. Integers: outside the column type's range.
    """
    if isinstance(value, str):
        max_length = column.max_length
        if (max_length is None or len(value) <= max_length) and value.isascii() and "\x00" not in value:
            return None  # the common case, in three cheap checks (isascii reads a flag)
        if max_length is not None and len(value) > max_length:
            return f"is {len(value)} characters long, more than the {max_length} stored"
        if "\x00" in value:
            return "holds a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode (it holds a lone surrogate)"
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        bounds = _INTEGER_RANGES.get(column.get_internal_type())
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            return f"is outside {bounds[0]} to {bounds[1]}"
    return None


def storable(info: _Info, specs: ColumnSpecs, problems: list[str] | None, what: str, *names: str) -> _Info | None:
    """`info` ready for its columns: None when a value that names it cannot be stored, else with every other
    unstorable value replaced by its column's default ("not reported"); each one noted in `problems`, as `what`
    formatted with `names` says (worked out only then)."""
    changes: dict[str, Any] = {}
    for name, column, names_it, max_length, (low, high), rule in specs:
        value = getattr(info, name)
        if value is None:
            continue
        reason: str | None
        if type(value) is str:  # the common cases first, without a call (isascii reads a flag)
            if len(value) <= max_length and value.isascii() and "\x00" not in value:
                # An empty value is "not reported" (a reading's node); a name that is given must follow the rules.
                if rule is None or not value or (reason := name_problem(rule, value)) is None:
                    continue
            else:
                reason = unstorable(value, column)
                if reason is None and rule is not None and value:  # fits, but not ASCII: no Kubernetes name
                    reason = name_problem(rule, value)
        elif type(value) is int and low <= value <= high:
            continue
        else:
            reason = unstorable(value, column)
        if reason is None:
            continue
        where = said(what, *names)
        if names_it:
            note(problems, f"{where}: {name} {excerpt(value)} {reason}; not stored")
            return None
        note(problems, f"{where}: {name} {excerpt(value)} {reason}; stored as unknown")
        changes[name] = column.get_default()
    return dataclasses.replace(info, **changes) if changes else info


def note(problems: list[str] | None, message: str) -> None:
    """Add `message` to `problems`, or log it as a warning when there is no list."""
    if problems is None:
        log.warning("%s", printable(message))  # it quotes names: a newline in one would forge a log line
    else:
        problems.append(message)


def said(what: str, *names: str) -> str:
    """`what` formatted with `names` for a problem message: each name cut to 60 characters (they may be garbage of
    any length), control characters, NULs and lone surrogates escaped so that the message can be stored, logged and
    printed as one line."""
    return what.format(*(printable(name if len(name) <= 60 else f"{name[:60]}…") for name in names))
