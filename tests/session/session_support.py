"""What the key-store and session tests share: running ``sandbx`` as a process with a
chosen stdin and umask, finding sandbx's own files under the test's home, and writing
or reading session transcripts the way sandbx lays them out.

Nothing here mocks sandbx: the CLI runs as its own process, its model calls go over
loopback to ``sandbx.testing.ScriptedMessagesServer``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from sandbx.testing import ScriptedMessagesServer
from tests.support import SANDBX, Run, Sandbx, parse_records

# Distinctive, so a leak anywhere in sandbx's output is found by a plain substring search.
STORED_KEY = "sk-ant-stored-4b1e9d0c-never-printed"
ENV_KEY = "sk-ant-environment-72ac5f13-never-printed"

STARTED = re.compile(
    r"^sandbx: session (?P<id>[0-9a-z]{8}) started; resume it with --session (?P=id)$"
)
HOSTILE_IDS = ("../x", "a/b", "ABCDEFGH", "1234567", "123456789", ".")


def run_sandbx(
    sbx: Sandbx,
    *args: str,
    stdin: bytes = b"",
    umask: int | None = None,
    timeout: float = 60,
    **env: str,
) -> Run:
    """``sandbx ARGS`` in the test's project, ``stdin`` on its stdin and, if given, a
    umask set by a shell that then execs sandbx."""
    argv = [*SANDBX, *args]
    if umask is not None:
        argv = ["/bin/sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", *argv]
    completed = subprocess.run(
        argv,
        cwd=sbx.workdir,
        env={**sbx.env, **env},
        capture_output=True,
        timeout=timeout,
        check=False,
        input=stdin,
    )
    stderr = completed.stderr.decode("utf-8", "replace")
    return Run(
        returncode=completed.returncode,
        stdout=completed.stdout.decode("utf-8", "replace"),
        stderr=stderr,
        records=parse_records(stderr),
    )


def assert_key_never_shown(run: Run, *keys: str) -> None:
    for key in keys or (STORED_KEY, ENV_KEY):
        assert key not in run.stdout
        assert key not in run.stderr


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --- the key store ------------------------------------------------------------------


def credential_file(sbx: Sandbx) -> Path:
    return sbx.home / ".config" / "sandbx" / "credentials.toml"


def login(sbx: Sandbx, key: str = STORED_KEY, **env: str) -> Run:
    run = run_sandbx(sbx, "auth", "login", stdin=key.encode(), **env)
    assert run.returncode == 0, run.stderr
    return run


# --- sessions ---------------------------------------------------------------------


def store_dir(sbx: Sandbx) -> Path:
    return sbx.home / ".local" / "state" / "sandbx" / "sessions"


def agent_run(
    sbx: Sandbx,
    server: ScriptedMessagesServer,
    *flags: str,
    prompt: str,
    timeout: float = 60,
    **env: str,
) -> Run:
    """``sandbx agent-run FLAGS -- PROMPT`` with a key in the environment, against ``server``."""
    environment = {"ANTHROPIC_API_KEY": ENV_KEY, "ANTHROPIC_BASE_URL": server.url, **env}
    return sbx.run("agent-run", *flags, "--", prompt, timeout=timeout, **environment)


def started_id(run: Run) -> str:
    """The id from the one ``session ID started`` line on stderr."""
    found = [match["id"] for line in run.messages if (match := STARTED.match(line))]
    assert len(found) == 1, run.stderr
    return found[0]


def bodies(server: ScriptedMessagesServer) -> list[dict[str, object]]:
    found = []
    for request in server.requests:
        assert isinstance(request.body, dict), request
        found.append(request.body)
    return found


def sent_messages(server: ScriptedMessagesServer, index: int) -> list[dict[str, object]]:
    """The ``messages`` of request ``index`` the server received."""
    messages = bodies(server)[index]["messages"]
    assert isinstance(messages, list)
    return messages


def answer(text: str) -> dict[str, object]:
    """An assistant message as sandbx keeps and resends a text-only reply."""
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def records_in(path: Path) -> list[dict[str, object]]:
    """Every record of a transcript whose lines are all whole."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), data[-200:]
    return [json.loads(line) for line in data.splitlines()]


def line(record: dict[str, object]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def header(*, version: int = 1, model: str = "claude-sonnet-5") -> dict[str, object]:
    return {"type": "header", "format": version, "created": "2026-01-02T03:04:05Z", "model": model}


def round_record(turn: int, *messages: dict[str, object]) -> dict[str, object]:
    return {"type": "round", "turn": turn, "messages": list(messages)}


def turn_record(turn: int, *, rounds: int = 0, input_tokens: int = 10) -> dict[str, object]:
    return {
        "type": "turn",
        "turn": turn,
        "outcome": "answered",
        "rounds": rounds,
        "usage": {"input_tokens": input_tokens, "output_tokens": 3},
        "withheld_turns": 0,
    }


def one_turn(prompt: str = "hello", reply_text: str = "hi there") -> list[dict[str, object]]:
    """A one-turn transcript of a question answered without tools, as sandbx writes it."""
    return [
        header(),
        round_record(1, {"role": "user", "content": prompt}, answer(reply_text)),
        turn_record(1),
    ]


def write_transcript(directory: Path, session_id: str, lines: Sequence[bytes]) -> Path:
    """A transcript at 0600 in a 0700 store, holding exactly ``lines``."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory.chmod(0o700)
    path = directory / f"{session_id}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"".join(lines))
    finally:
        os.close(fd)
    path.chmod(0o600)
    return path


def tree(root: Path) -> list[str]:
    """Every path below ``root``, relative, sorted; empty if ``root`` does not exist."""
    if not root.exists():
        return []
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))
