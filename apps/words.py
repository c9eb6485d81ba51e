"""Numbers and nouns in the text users read, written one way across the product (advice, pages, the probe's output),
and strings from outside (names, agent errors) made safe to print. Plain Python, importable from every layer."""

from __future__ import annotations


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
