"""Making model- and command-chosen text safe to show a person on a terminal.

Control characters, escape sequences, bidirectional overrides and invisible
characters are replaced, so a tool argument cannot redraw the terminal or hide
what it really says; long text is cut with a marker.
"""

from __future__ import annotations

import unicodedata

_BIDI_AND_INVISIBLE = frozenset(
    "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
)
REPLACEMENT = "\ufffd"


def shown_safely_lines(text: str) -> str:
    """The same, line by line: newlines are kept, everything else is cleaned; nothing is cut."""
    return "\n".join(shown_safely(line, len(line)) for line in text.split("\n"))


def shown_safely(text: str, limit: int = 512) -> str:
    cleaned = "".join(
        REPLACEMENT
        if char in _BIDI_AND_INVISIBLE
        or (unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs") and char != "\t")
        else char
        for char in text
    )
    if len(cleaned) > limit:
        return cleaned[:limit] + f"… [{len(cleaned) - limit} more characters]"
    return cleaned
