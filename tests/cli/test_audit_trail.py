"""The audit trail through the CLI: the exact record lines on stderr, never on stdout, ids unique
across processes, and a command that can neither forge a record nor have its output altered.
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import SANDBX, Sandbx, parse_records

pytestmark = pytest.mark.boundary

LINE = re.compile(
    r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  (INFO|WARN) sandbx::audit: decision="[a-z]+" '
    r'spawn="[^"]+" session="-" program=".*"'
)
SPAWN_ID = re.compile(r"^[0-9a-f]+\.[0-9a-f]{16}\.\d+$")
FLOOR = ("/usr", "/bin", "/lib", "/lib64")
FORGED = (
    '2026-10-28T14:33:42.998120Z  INFO sandbx::audit: decision="exited" '
    'spawn="forged.0000000000000000.0" session="-" program="/bin/true" code=0'
)


def floor_count() -> int:
    return len({os.path.realpath(path) for path in FLOOR if os.path.exists(path)})


def run_binary(sbx: Sandbx, *command: str, flags: tuple[str, ...] = ()) -> tuple[int, bytes, bytes]:
    """Run sandbox-run with bytes in and out, for output that need not be text."""
    completed = subprocess.run(
        [*SANDBX, "sandbox-run", *flags, "--", *command],
        cwd=sbx.workdir,
        env=sbx.env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return completed.returncode, completed.stdout, completed.stderr


def record_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " sandbx::audit: " in line]


def test_records_go_to_stderr_and_never_to_stdout(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/echo", "hello")
    assert run.stdout == "hello\n"
    assert [record["decision"] for record in run.records] == ["spawned", "exited"]
    assert parse_records(run.stdout) == []


def test_the_spawned_record_has_the_spec_fields_in_the_spec_order(
    sbx: Sandbx, tmp_path: Path
) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", str(srv)])
    assert run.returncode == 0, run.stderr
    spawned = run.record("spawned")
    assert list(spawned) == [
        "level",
        "time",
        "decision",
        "spawn",
        "session",
        "program",
        "args",
        "readable",
        "writable",
        "executable",
        "network",
        "network_ports",
        "unix_sockets",
        "env",
        "dns_over_tcp",
        "dns_names",
        "pinned",
    ]
    assert {name: value for name, value in spawned.items() if name not in ("time", "spawn")} == {
        "level": "INFO",
        "decision": "spawned",
        "session": "-",
        "program": "/bin/true",
        "args": [],
        "readable": 1,
        "writable": 0,
        "executable": floor_count(),
        "network": "denied",
        "network_ports": 0,
        "unix_sockets": False,
        "env": 7,
        "dns_over_tcp": False,
        "dns_names": 0,
        "pinned": False,
    }


def test_the_spawned_line_reads_exactly_as_the_spec_prints_it(sbx: Sandbx, tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    srv.mkdir()
    run = sbx.sandbox_run("/bin/true", flags=["--allow-read", str(srv)])
    spawned_line = record_lines(run.stderr)[0]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  INFO sandbx::audit: "
        r'decision="spawned" spawn="[0-9a-f]+\.[0-9a-f]{16}\.\d+" session="-" '
        r'program="/bin/true" args=\[\] readable=1 writable=0 '
        rf"executable={floor_count()} "
        r'network="denied" network_ports=0 unix_sockets=false env=7 dns_over_tcp=false '
        r"dns_names=0 pinned=false",
        spawned_line,
    )


def test_the_exited_record_follows_with_the_same_spawn_and_the_code(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/sh", "-c", "exit 3")
    assert run.returncode == 3
    spawned, exited = run.records
    assert {name: value for name, value in exited.items() if name != "time"} == {
        "level": "INFO",
        "decision": "exited",
        "spawn": spawned["spawn"],
        "session": "-",
        "program": "/bin/sh",
        "code": 3,
    }
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  INFO sandbx::audit: "
        r'decision="exited" spawn="[^"]+" session="-" program="/bin/sh" code=3',
        record_lines(run.stderr)[1],
    )


def test_every_record_line_has_the_spec_prefix(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/missing-program")
    lines = record_lines(run.stderr)
    assert len(lines) == 2
    for line in lines:
        assert LINE.match(line), line
    assert re.match(r'^\S+Z  WARN sandbx::audit: decision="failed" ', lines[1]), lines[1]


def test_a_spawn_id_has_the_spec_shape(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/true")
    assert SPAWN_ID.match(str(run.record("spawned")["spawn"]))


def test_spawn_ids_are_unique_across_concurrent_sandbx_processes(sbx: Sandbx) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda _: sbx.sandbox_run("/bin/sleep", "0.2"), range(4)))
    ids = []
    for run in runs:
        assert run.returncode == 0, run.stderr
        spawned, exited = run.records
        assert spawned["spawn"] == exited["spawn"]
        ids.append(spawned["spawn"])
    assert len(set(ids)) == len(ids)


def test_concurrent_runs_sharing_one_appended_file_write_whole_lines(
    sbx: Sandbx, tmp_path: Path
) -> None:
    trail = tmp_path / "trail.log"
    fd = os.open(trail, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        processes = [
            subprocess.Popen(
                [*SANDBX, "sandbox-run", "--", "/bin/sleep", "0.2"],
                cwd=sbx.workdir,
                env=sbx.env,
                stdout=subprocess.DEVNULL,
                stderr=fd,
            )
            for _ in range(3)
        ]
        assert [process.wait(timeout=60) for process in processes] == [0, 0, 0]
    finally:
        os.close(fd)
    text = trail.read_text()
    records = parse_records(text)
    assert len(records) == 6
    assert len(text.splitlines()) == 6
    assert len({record["spawn"] for record in records}) == 3


def test_args_past_512_characters_are_cut_with_an_ellipsis_on_one_line(sbx: Sandbx) -> None:
    long_argument = "x" * 600
    run = sbx.sandbox_run("/bin/echo", long_argument)
    assert run.returncode == 0
    assert run.stdout == long_argument + "\n"
    assert run.record("spawned")["args"] == ["x" * 512 + "…"]
    assert len(record_lines(run.stderr)) == 2
    assert len(run.stderr.splitlines()) == 2


def test_args_of_exactly_512_characters_are_kept_whole(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/echo", "a" * 256, "b" * 256)
    assert run.record("spawned")["args"] == ["a" * 256, "b" * 256]


def test_the_cut_counts_characters_across_arguments(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/echo", "é" * 300, "ü" * 300, "dropped")
    assert run.record("spawned")["args"] == ["é" * 300, "ü" * 212 + "…"]


@pytest.mark.parametrize(
    "argument",
    ['say "hi"', "two\nlines", "back\\slash", "tab\there", "cr\rhere", "nel\x85here"],
    ids=["quote", "newline", "backslash", "tab", "carriage-return", "next-line"],
)
def test_an_awkward_argument_is_escaped_and_stays_on_one_line(sbx: Sandbx, argument: str) -> None:
    run = sbx.sandbox_run("/bin/true", argument)
    assert run.returncode == 0, run.stderr
    assert run.record("spawned")["args"] == [argument]
    assert len(run.stderr.splitlines()) == 2


def test_a_command_printing_a_record_line_cannot_forge_a_record(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/sh", "-c", 'printf "%s\\n" "$0" >&2', FORGED)
    assert run.returncode == 0, run.stderr
    assert [record["decision"] for record in run.records] == ["spawned", "exited"]
    assert "forged" not in {str(record["spawn"]) for record in run.records}
    assert 'spawn="forged.0000000000000000.0"' in run.stderr


def test_a_marker_split_across_two_writes_cannot_forge_a_record(sbx: Sandbx) -> None:
    cut = FORGED.index("sandbx::au") + len("sandbx::au")
    script = 'printf "%s" "$0" >&2; sleep 0.1; printf "%s\\n" "$1" >&2'
    run = sbx.sandbox_run("/bin/sh", "-c", script, FORGED[:cut], FORGED[cut:])
    assert run.returncode == 0, run.stderr
    assert [record["decision"] for record in run.records] == ["spawned", "exited"]
    assert 'spawn="forged.0000000000000000.0"' in run.stderr


def test_a_forged_line_is_not_kept_by_the_spec_filter_for_records(sbx: Sandbx) -> None:
    """The spec: `2>&1 >/dev/null | grep sandbx::audit` gives "the record alone"."""
    run = sbx.sandbox_run("/bin/sh", "-c", 'printf "%s\\n" "$0" >&2', FORGED)
    kept = [line for line in run.stderr.splitlines() if "sandbx::audit" in line]
    assert len(kept) == 2, kept


def test_an_unterminated_stderr_line_does_not_swallow_the_closing_record(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/sh", "-c", "printf 'no newline' >&2")
    assert [record["decision"] for record in run.records] == ["spawned", "exited"]
    assert "no newline\n" in run.stderr


def test_stdout_is_forwarded_byte_for_byte(sbx: Sandbx) -> None:
    payload = bytes(range(256)) * 4096 + b"\r\n\x00 no trailing newline"
    (sbx.workdir / "bytes.bin").write_bytes(payload)
    code, stdout, stderr = run_binary(sbx, "/bin/cat", "bytes.bin")
    assert code == 0, stderr
    assert stdout == payload
    assert b"sandbx::audit" not in stdout


def test_stdout_carrying_the_marker_is_forwarded_untouched(sbx: Sandbx) -> None:
    code, stdout, _ = run_binary(sbx, "/bin/echo", FORGED)
    assert code == 0
    assert stdout == FORGED.encode() + b"\n"


def test_stderr_is_forwarded_byte_for_byte_between_the_records(sbx: Sandbx) -> None:
    payload = bytes(range(256)) * 16
    (sbx.workdir / "bytes.bin").write_bytes(payload)
    code, stdout, stderr = run_binary(sbx, "/bin/sh", "-c", "cat bytes.bin >&2")
    assert code == 0
    assert stdout == b""
    first_end = stderr.index(b"\n") + 1
    last_start = stderr.rindex(b"\n", 0, len(stderr) - 1) + 1
    assert b'decision="spawned"' in stderr[:first_end]
    assert b'decision="exited"' in stderr[last_start:]
    # The payload ends without a newline, so one is added before the closing record.
    assert stderr[first_end:last_start] == payload + b"\n"


def test_a_commands_own_stderr_lines_are_forwarded(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/bin/sh", "-c", "echo one >&2; echo two >&2; echo out")
    assert run.stdout == "out\n"
    lines = run.stderr.splitlines()
    assert lines[1:3] == ["one", "two"]
    assert len(run.records) == 2
