"""--pin-sha256 names the program's bytes: a match runs, a mismatch refuses before anything
executes (both digests on stderr), and a program whose bytes cannot be checked is refused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tests.support import Run, Sandbx, running_as_root

pytestmark = pytest.mark.boundary


def digest_of(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A directory outside the project holding a copy of /bin/sh, to be granted --allow-exec."""
    directory = tmp_path / "tools"
    directory.mkdir()
    shutil.copy2(os.path.realpath("/bin/sh"), directory / "sh")
    return directory


def run_copied_shell(sbx: Sandbx, tools: Path, digest: str) -> Run:
    marker = sbx.workdir / "marker"
    return sbx.sandbox_run(
        str(tools / "sh"),
        "-c",
        f"/usr/bin/touch {marker}",
        flags=[
            "--allow-exec",
            str(tools),
            "--allow-write",
            str(sbx.workdir),
            "--pin-sha256",
            digest,
        ],
    )


def assert_refused_before_spawn(run: Run, *fragments: str) -> None:
    assert run.returncode == 1, run.stderr
    assert run.records == []
    assert "Traceback" not in run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr
    for fragment in fragments:
        assert fragment in run.stderr


def test_a_matching_pin_from_sandbx_hash_runs_the_program(sbx: Sandbx) -> None:
    digest = sbx.run("hash", "/usr/bin/true").stdout.strip()
    run = sbx.sandbox_run("/usr/bin/true", flags=["--pin-sha256", digest])
    assert run.returncode == 0, run.stderr
    assert run.record("spawned")["pinned"] is True
    assert run.record("exited")["code"] == 0


def test_an_unpinned_run_records_pinned_false(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/usr/bin/true")
    assert run.record("spawned")["pinned"] is False


def test_an_uppercase_digest_is_taken_as_the_same_pin(sbx: Sandbx) -> None:
    digest = digest_of("/usr/bin/true").upper()
    run = sbx.sandbox_run("/usr/bin/true", flags=["--pin-sha256", digest])
    assert run.returncode == 0, run.stderr


def test_a_matching_pin_runs_a_copied_program_and_its_side_effect_happens(
    sbx: Sandbx, tools: Path
) -> None:
    run = run_copied_shell(sbx, tools, digest_of(tools / "sh"))
    assert run.returncode == 0, run.stderr
    assert run.record("spawned")["pinned"] is True
    assert (sbx.workdir / "marker").exists()


def test_a_mismatched_pin_refuses_the_run_before_the_program_executes(
    sbx: Sandbx, tools: Path
) -> None:
    wrong = digest_of("/usr/bin/true")
    right = digest_of(tools / "sh")
    run = run_copied_shell(sbx, tools, wrong)
    assert run.returncode == 1
    assert run.record("spawned")["pinned"] is True
    failed = run.record("failed")
    assert failed["reason"] == "pin_mismatch"
    assert failed["level"] == "WARN"
    assert wrong in run.stderr
    assert right in run.stderr
    assert "Traceback" not in run.stderr
    assert not (sbx.workdir / "marker").exists()


def test_a_mismatch_explains_itself_in_one_sandbx_line(sbx: Sandbx, tools: Path) -> None:
    wrong = digest_of("/usr/bin/true")
    run = run_copied_shell(sbx, tools, wrong)
    assert len(run.messages) == 1
    assert wrong in run.messages[0]
    assert "sandbx hash PATH" in run.messages[0]


def test_a_program_replaced_after_hashing_is_refused(sbx: Sandbx, tools: Path) -> None:
    digest = digest_of(tools / "sh")
    shutil.copy2("/usr/bin/true", tools / "sh")
    run = run_copied_shell(sbx, tools, digest)
    assert run.record("failed")["reason"] == "pin_mismatch"
    assert not (sbx.workdir / "marker").exists()


def test_a_shebang_script_is_refused_with_advice_to_pin_the_interpreter(
    sbx: Sandbx, tools: Path
) -> None:
    marker = sbx.workdir / "marker"
    script = tools / "script"
    script.write_text(f"#!/bin/sh\n/usr/bin/touch {marker}\n")
    script.chmod(0o755)
    run = sbx.sandbox_run(
        str(script),
        flags=[
            "--allow-exec",
            str(tools),
            "--allow-write",
            str(sbx.workdir),
            "--pin-sha256",
            digest_of(script),
        ],
    )
    assert_refused_before_spawn(run, "#! script", "pin the interpreter", str(script))
    assert not marker.exists()


def test_pinning_the_interpreter_runs_a_script_passed_as_its_argument(
    sbx: Sandbx, tools: Path
) -> None:
    marker = sbx.workdir / "marker"
    script = tools / "script"
    script.write_text(f"#!/bin/sh\n/usr/bin/touch {marker}\n")
    run = sbx.sandbox_run(
        str(tools / "sh"),
        str(script),
        flags=[
            "--allow-exec",
            str(tools),
            "--allow-write",
            str(sbx.workdir),
            "--pin-sha256",
            digest_of(tools / "sh"),
        ],
    )
    assert run.returncode == 0, run.stderr
    assert marker.exists()


def test_pinning_a_missing_program_is_refused_before_spawn(sbx: Sandbx, tools: Path) -> None:
    missing = tools / "missing"
    run = sbx.sandbox_run(str(missing), flags=["--pin-sha256", "0" * 64])
    assert_refused_before_spawn(run, "--pin-sha256", str(missing))


@pytest.mark.skipif(
    running_as_root(), reason="root reads any file, so an exec-only program is readable to it"
)
def test_a_program_that_may_be_executed_but_not_read_is_refused(sbx: Sandbx, tools: Path) -> None:
    program = tools / "exec-only"
    shutil.copy2("/usr/bin/true", program)
    program.chmod(0o111)
    run = sbx.sandbox_run(
        str(program),
        flags=["--allow-exec", str(tools), "--pin-sha256", digest_of("/usr/bin/true")],
    )
    assert_refused_before_spawn(run, "--pin-sha256", str(program), "read")


@pytest.mark.skipif(
    running_as_root(), reason="root reads any file, so an exec-only program is readable to it"
)
def test_an_exec_only_program_runs_when_it_is_not_pinned(sbx: Sandbx, tools: Path) -> None:
    program = tools / "exec-only"
    shutil.copy2("/usr/bin/true", program)
    program.chmod(0o111)
    run = sbx.sandbox_run(str(program), flags=["--allow-exec", str(tools)])
    assert run.returncode == 0, run.stderr
