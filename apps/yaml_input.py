"""YAML from outside (offline dumps, lab scenarios, the stand-in's cluster folders), read one bounded way.

PyYAML's safe loaders build no objects from tags, but they do expand aliases: a few hundred bytes of nested
`&b [*a, *a, …]` stand for billions of nodes, paid for by whatever walks the result (a validator, a repr() in an
error message). So the document's events are counted first, each alias as the nodes its anchor holds: aliases may
add at most MAX_ALIAS_NODES nodes in all, and none may sit inside the node it names (a cycle). kubectl never writes
aliases; a hand-written scenario may use a few (`<<: *defaults`). Counting the events costs about a tenth of loading.

The text's length is capped (the README states each cap), and libyaml's C loader is used when PyYAML has it.
"""

from __future__ import annotations

from typing import Any

import yaml

from apps.words import printable

MAX_YAML_CHARS = 16 * 1024 * 1024  # kubectl writes ~5 kB of YAML a pod: ~3,500 pods; JSON dumps have no such cap
MAX_ALIAS_NODES = 1_000

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlError(ValueError):
    """Text the loader will not return, said in one bounded line: not YAML (`syntax`: the parser's problem and its
    line), or refused (too long, aliases standing for too much, a value no safe type holds)."""

    def __init__(self, message: str, *, syntax: bool = False) -> None:
        super().__init__(message)
        self.syntax = syntax


def load_yaml(text: str, *, max_chars: int = MAX_YAML_CHARS) -> Any:
    """The one YAML document in `text`, as plain values (dicts, lists, strings, numbers, dates). Raises YamlError."""
    if len(text) > max_chars:
        raise YamlError(f"{len(text):,} characters, more than the {max_chars:,} read as YAML")
    try:
        _check_aliases(yaml.parse(text, Loader=_LOADER))
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader, the C one when available
    except YamlError:
        raise
    except yaml.YAMLError as exc:
        raise YamlError(_reason(exc), syntax=True) from None
    except RecursionError:  # the pure-Python loader on deep nesting; libyaml stops at its own depth limit
        raise YamlError("nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # e.g. a timestamp 2024-13-45, an integer of over 4,300 digits
        raise YamlError(f"a value cannot be read: {printable(str(exc))[:200]}") from None


def _check_aliases(events: Any) -> None:
    """Refuse aliases that stand for more than MAX_ALIAS_NODES nodes in all, or for a node they are inside."""
    held: dict[str, int] = {}  # anchor → the nodes it holds, its aliases' expanded
    open_collections: list[tuple[str | None, int]] = []  # (anchor, nodes counted before it started)
    nodes = added = 0
    for event in events:
        if isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in open_collections):
                raise YamlError(f"the alias at {_line(event)} is inside the node it names (a cycle)")
            size = held.get(event.anchor or "", 1)  # an unknown anchor is the loader's error to report
            nodes += size
            added += size
            if added > MAX_ALIAS_NODES:
                raise YamlError(
                    f"aliases stand for more than {MAX_ALIAS_NODES:,} nodes (at {_line(event)}): write the values out"
                )
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor:
                held[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            open_collections.append((event.anchor, nodes))
            nodes += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, before = open_collections.pop()
            if anchor:
                held[anchor] = nodes - before


def _line(event: yaml.Event) -> str:
    mark = event.start_mark
    return "an unknown line" if mark is None else f"line {mark.line + 1}, column {mark.column + 1}"


def _reason(exc: yaml.YAMLError) -> str:
    """The parser's problem and where, in one line (str() of a MarkedYAMLError spans several, with a snippet)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return printable(f"{problem}{where}")[:300]
