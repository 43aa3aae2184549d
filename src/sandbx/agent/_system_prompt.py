"""The system prompt: sandbx's own lines naming the approved tools and the roots, then the
user's ``--system`` text, which is appended and never replaces them."""

from __future__ import annotations

from collections.abc import Iterable


def system_prompt(
    *,
    approved: Iterable[str],
    readable: Iterable[str],
    writable: Iterable[str],
    working_directory: str,
    network: str,
    extra: str = "",
) -> str:
    lines = [
        "You are answering one question inside sandbx, a sandbox for coding agents.",
        f"Approved tools: {', '.join(sorted(approved))}. Other tools will be refused.",
        f"Working directory: {working_directory}",
        f"Readable roots: {', '.join(readable) or 'none'}",
        f"Writable roots: {', '.join(writable) or 'none'}",
        f"Network: {network}.",
        "A path outside these roots is refused; work within them.",
    ]
    text = "\n".join(lines)
    return f"{text}\n\n{extra}" if extra else text
