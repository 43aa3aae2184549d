"""Shared test helpers: run the real ``sandbx`` CLI as a process and read its audit records.

Tests drive sandbx the way a user does (a process, real flags, real kernel) and
assert on exit codes, stdout, the audit records on stderr, and side effects on
the host. Nothing here mocks the boundary.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SANDBX = (sys.executable, "-m", "sandbx")

_RECORD = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) +(?P<level>INFO|WARN) sandbx::audit: "
    r"(?P<body>.*)$"
)
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_FIELD = re.compile(rf"(?P<name>[a-z_]+)=(?P<value>{_QUOTED}|\[(?:[^\]\"]|{_QUOTED})*\]|\S+)")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(
        r"\\(u\{[0-9a-f]+\}|.)",
        lambda m: (
            chr(int(m.group(1)[2:-1], 16))
            if m.group(1).startswith("u{")
            else {"n": "\n", "r": "\r", "t": "\t", "0": "\0"}.get(m.group(1), m.group(1))
        ),
        body,
    )


def _value(text: str) -> object:
    if text.startswith('"'):
        return _unquote(text)
    if text.startswith("["):
        return [_unquote(m.group(0)) for m in _STRING.finditer(text)]
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def parse_records(stderr: str) -> list[dict[str, object]]:
    """Every audit record in ``stderr``, as a dict of its fields (``decision`` first)."""
    records = []
    for line in stderr.splitlines():
        match = _RECORD.match(line)
        if match:
            fields: dict[str, object] = {"level": match["level"], "time": match["time"]}
            for field_match in _FIELD.finditer(match["body"]):
                fields[field_match["name"]] = _value(field_match["value"])
            records.append(fields)
    return records


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    records: list[dict[str, object]] = field(default_factory=list)

    @property
    def messages(self) -> list[str]:
        """sandbx's own lines on stderr (not records, not the command's output)."""
        return [line for line in self.stderr.splitlines() if line.startswith("sandbx: ")]

    def record(self, decision: str) -> dict[str, object]:
        found = [r for r in self.records if r["decision"] == decision]
        assert len(found) == 1, f"expected one {decision} record, got {self.records}"
        return found[0]


def base_environment(home: Path) -> dict[str, str]:
    """A small, predictable environment: PATH, a HOME of the test's own, nothing secret."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
    }
    # Where sandbx is imported from a source tree rather than installed, the
    # sandbx process (never the command inside it) needs the same path.
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    # Coverage of the sandbx process, when the suite runs under it.
    env.update({name: value for name, value in os.environ.items() if name.startswith("COVERAGE_")})
    return env


def sandbx(
    *args: str,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = 60,
    stdin: str | None = None,
) -> Run:
    completed = subprocess.run(
        [*SANDBX, *args],
        cwd=cwd,
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Run(
        returncode=completed.returncode,
        stdout=completed.stdout,
        stderr=completed.stderr,
        records=parse_records(completed.stderr),
    )


@dataclass
class Sandbx:
    """A test's own working directory and home, and a way to run sandbx from there."""

    workdir: Path
    home: Path
    env: dict[str, str]

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 60, **env: str) -> Run:
        return sandbx(*args, cwd=cwd or self.workdir, env={**self.env, **env}, timeout=timeout)

    def sandbox_run(self, *command: str, flags: Sequence[str] = (), **kwargs: object) -> Run:
        return self.run("sandbox-run", *flags, "--", *command, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def sbx(tmp_path: Path) -> Sandbx:
    workdir = tmp_path / "project"
    home = tmp_path / "home"
    workdir.mkdir()
    home.mkdir()
    return Sandbx(workdir=workdir, home=home, env=base_environment(home))


def running_as_root() -> bool:
    return os.geteuid() == 0
