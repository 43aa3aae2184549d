"""What the tui tests share: a command on the host found by a marker in its command line,
and reading the text an SVG screenshot shows.

The screen tests (test_tui_screen.py) run ``TurnScreen`` under Textual's pilot with a real
turn: the real tool box, the real boundary, a scripted Messages server on loopback. The
process tests (test_tui_process.py) run ``sandbx tui`` under tmux, a real terminal.
"""

from __future__ import annotations

import html
import os
import re
import secrets
import time
from pathlib import Path

# Distinctive, so a leak anywhere in sandbx's output is found by a plain substring search.
KEY = "sk-ant-test-7d41e0c2-never-printed"
SNAPSHOTS = Path(__file__).parent / "snapshots"
_CELL_WIDTH = 12.2


def sleep_marker(seconds: int = 20) -> str:
    """A ``sleep`` duration nobody else on the host uses, so the command can be found in /proc."""
    return f"{seconds}.{secrets.randbelow(10**6):06d}"


def processes_with(marker: str) -> list[int]:
    """The pids of the processes on the host whose command line mentions ``marker``."""
    wanted = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if wanted in cmdline.read():
                    found.append(int(entry))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def wait_for_process(marker: str, *, timeout: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = processes_with(marker)
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no process mentioning {marker!r} started within {timeout} s")


def wait_for_no_process(marker: str, *, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not processes_with(marker):
            return
        time.sleep(0.05)
    raise AssertionError(f"processes mentioning {marker!r} still run: {processes_with(marker)}")


def svg_text(svg: str) -> str:
    """The text an SVG screenshot shows, one line per line of the screen, each character in
    its column (Rich draws a screen as runs of text placed at x = column * 12.2)."""
    lines: dict[float, dict[int, str]] = {}
    for match in re.finditer(
        r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg
    ):
        column, y = round(float(match[1]) / _CELL_WIDTH), float(match[2])
        lines.setdefault(y, {})[column] = html.unescape(match[3]).replace("\xa0", " ")
    shown = []
    for _y, runs in sorted(lines.items()):
        line = ""
        for column, text in sorted(runs.items()):
            line = line.ljust(column) + text
        shown.append(line.rstrip())
    return "\n".join(shown)


def kill_quietly(pid: int, signal_number: int) -> None:
    try:
        os.kill(pid, signal_number)
    except (ProcessLookupError, PermissionError):
        return
