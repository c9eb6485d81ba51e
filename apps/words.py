"""Numbers and nouns in the text users read, written one way across the product (advice, pages, the probe's output),
and strings from outside (names, agent errors) made safe to print. Plain Python, importable from every layer."""

from __future__ import annotations

import reprlib


def format_number(value: float) -> str:
    """At most two decimals, none when whole: 20.0 → "20", 6.6667 → "6.67", 1234.0 → "1234"."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def plural(count: float, noun: str, plural_noun: str = "") -> str:
    """The count with its noun, singular for exactly one: plural(1, "thread") → "1 thread", plural(1500, "period") →
    "1,500 periods", plural(2.5, "slice") → "2.5 slices"; irregular nouns name their plural: ("process", "processes")."""
    number = f"{count:,}" if isinstance(count, int) else format_number(count)
    return f"{number} {noun if count == 1 else plural_noun or noun + 's'}"


def printable(text: str) -> str:
    """`text` for a terminal or a log line: every character Python does not count as printable (newline, ESC and the
    other control characters, line separators, bidi overrides) as its escape, `\\n`, `\\x1b`, `\\u2028`. A name or an
    agent's error line then cannot forge a log line or send the terminal an escape sequence (a window title)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class _BoundedRepr(reprlib.Repr):
    """repr() that stops after a few items per level and a few levels: quoting a huge or alias-expanded document
    costs what quoting a short one does."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple, self.maxset = 3, 4, 4, 4, 4
        self.maxstring, self.maxother = 60, 200  # excerpt() cuts the whole; this only bounds the work

    def repr_int(self, x: int, level: int) -> str:
        # repr() of an integer of over 4,300 digits raises ValueError: say its size instead.
        return f"(a {x.bit_length()}-bit number)" if x.bit_length() > 64 else repr(x)


_BOUNDED = _BoundedRepr()


def excerpt(value: object, max_chars: int = 60) -> str:
    """A value quoted for a message: a string's repr() cut to `max_chars` characters of it (then "…"), anything else
    as a bounded repr (a few items, a few levels deep) cut to `max_chars`. Control characters come out escaped."""
    if isinstance(value, str):
        return repr(value) if len(value) <= max_chars else f"{value[:max_chars]!r}…"
    text = _BOUNDED.repr(value)
    return text if len(text) <= max_chars else f"{text[:max_chars]}…"
