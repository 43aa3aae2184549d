"""The command line as a user types it: usage errors (exit 64, one line), --help, `sandbx hash`,
and the cleared environment that --allow-env opens one name at a time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.support import Run, Sandbx
from tests.support import sandbx as run_sandbx

EX_USAGE = 64
DEFAULT_NAMES = ("PATH", "HOME", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
VALID_DIGEST = "0" * 64


def assert_usage_error(run: Run) -> str:
    """Exit 64, one ``sandbx:`` line on stderr, no traceback, nothing spawned; returns the line."""
    assert run.returncode == EX_USAGE, run.stderr
    assert run.stdout == ""
    assert run.records == []
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("sandbx: ")
    return lines[0]


def test_no_subcommand_is_a_usage_error_on_one_line(sbx: Sandbx) -> None:
    assert_usage_error(sbx.run())


def test_an_unknown_subcommand_is_a_usage_error_naming_it(sbx: Sandbx) -> None:
    line = assert_usage_error(sbx.run("frobnicate"))
    assert "'frobnicate'" in line
    assert "sandbx --help" in line


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--frob"], "--frob"),
        (["--allow-r", "/tmp"], "--allow-r"),
        (["--allow-e", "PATH"], "--allow-e"),
        (["--pin", VALID_DIGEST], "--pin"),
    ],
    ids=["unknown", "abbreviated-read", "abbreviated-env", "abbreviated-pin"],
)
def test_an_unknown_or_abbreviated_flag_is_a_usage_error(
    sbx: Sandbx, flags: list[str], named: str
) -> None:
    line = assert_usage_error(sbx.sandbox_run("/bin/true", flags=flags))
    assert named in line


@pytest.mark.parametrize("words", [["sandbox-run"], ["sandbox-run", "--"]], ids=["bare", "dashes"])
def test_a_missing_command_is_a_usage_error(sbx: Sandbx, words: list[str]) -> None:
    line = assert_usage_error(sbx.run(*words))
    assert "--" in line


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf", ""])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(sbx: Sandbx, value: str) -> None:
    line = assert_usage_error(sbx.sandbox_run("/bin/true", flags=["--timeout", value]))
    assert "--timeout" in line


def test_pin_sha256_given_twice_is_a_usage_error(sbx: Sandbx) -> None:
    flags = ["--pin-sha256", VALID_DIGEST, "--pin-sha256", VALID_DIGEST]
    line = assert_usage_error(sbx.sandbox_run("/usr/bin/true", flags=flags))
    assert "--pin-sha256" in line


@pytest.mark.parametrize("digest", ["nothex", "0" * 63, "0" * 65, "g" * 64, "0x" + "0" * 62])
def test_pin_sha256_that_is_not_a_digest_is_a_usage_error(sbx: Sandbx, digest: str) -> None:
    line = assert_usage_error(sbx.sandbox_run("/usr/bin/true", flags=["--pin-sha256", digest]))
    assert "--pin-sha256" in line


def test_pin_sha256_with_a_relative_program_is_a_usage_error(sbx: Sandbx) -> None:
    line = assert_usage_error(sbx.sandbox_run("true", flags=["--pin-sha256", VALID_DIGEST]))
    assert "absolute" in line


@pytest.mark.parametrize(
    "name", ["SECRET=hunter2", "", "A\tB=C"], ids=["assignment", "empty", "tab-and-assignment"]
)
def test_allow_env_takes_only_a_name(sbx: Sandbx, name: str) -> None:
    line = assert_usage_error(sbx.sandbox_run("/bin/true", flags=["--allow-env", name]))
    assert "--allow-env" in line


def test_help_exits_zero_and_lists_the_subcommands(sbx: Sandbx) -> None:
    run = sbx.run("--help")
    assert run.returncode == 0
    assert "sandbox-run" in run.stdout + run.stderr
    assert "hash" in run.stdout + run.stderr


# --- sandbx hash --------------------------------------------------------------


def test_hash_prints_the_sha256_of_a_file_and_a_newline(sbx: Sandbx) -> None:
    content = bytes(range(256)) * 5000  # past one read chunk
    (sbx.workdir / "tool").write_bytes(content)
    run = sbx.run("hash", "tool")
    assert run.returncode == 0, run.stderr
    assert run.stdout == hashlib.sha256(content).hexdigest() + "\n"
    assert run.stderr == ""


def test_hash_of_a_system_program_matches_hashlib(sbx: Sandbx) -> None:
    run = sbx.run("hash", "/usr/bin/true")
    expected = hashlib.sha256(Path("/usr/bin/true").read_bytes()).hexdigest()
    assert run.stdout == expected + "\n"


@pytest.mark.parametrize("target", ["missing", "."], ids=["missing", "directory"])
def test_hash_of_what_cannot_be_hashed_exits_one_with_one_line(sbx: Sandbx, target: str) -> None:
    run = sbx.run("hash", target)
    assert run.returncode == 1
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith("sandbx: ")
    assert target in run.stderr


def test_hash_without_a_path_is_a_usage_error(sbx: Sandbx) -> None:
    assert_usage_error(sbx.run("hash"))


# --- the cleared environment --------------------------------------------------


def environment_inside(run: Run) -> dict[str, str]:
    assert run.returncode == 0, run.stderr
    entries = [entry for entry in run.stdout.split("\0") if entry]
    return dict(entry.split("=", 1) for entry in entries)


def full_environment(sbx: Sandbx) -> dict[str, str]:
    return {
        **sbx.env,
        "PATH": "/usr/bin:/bin",
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "LC_CTYPE": "C.UTF-8",
        "TZ": "Europe/Paris",
        "SECRET_TOKEN": "hunter2",
        "EXTRA_ONE": "line one\nline two = ü",
        "EXTRA_TWO": "",
    }


@pytest.mark.boundary
def test_only_the_seven_default_names_cross_by_default(sbx: Sandbx) -> None:
    env = full_environment(sbx)
    run = run_sandbx("sandbox-run", "--", "/usr/bin/env", "-0", cwd=sbx.workdir, env=env)
    assert environment_inside(run) == {name: env[name] for name in DEFAULT_NAMES}
    assert run.record("spawned")["env"] == 7


@pytest.mark.boundary
def test_allow_env_passes_each_named_variable_with_its_value(sbx: Sandbx) -> None:
    env = full_environment(sbx)
    run = run_sandbx(
        "sandbox-run",
        "--allow-env",
        "EXTRA_ONE",
        "--allow-env",
        "EXTRA_TWO",
        "--",
        "/usr/bin/env",
        "-0",
        cwd=sbx.workdir,
        env=env,
    )
    expected = {name: env[name] for name in (*DEFAULT_NAMES, "EXTRA_ONE", "EXTRA_TWO")}
    assert environment_inside(run) == expected
    assert run.record("spawned")["env"] == 9


@pytest.mark.boundary
def test_a_secret_in_the_launching_environment_does_not_cross(sbx: Sandbx) -> None:
    leaked_value = "hunter2"
    run = sbx.sandbox_run("/usr/bin/env", "-0", SECRET_TOKEN=leaked_value)
    assert "SECRET_TOKEN" not in environment_inside(run)
    assert leaked_value not in run.stdout
    assert leaked_value not in run.stderr


@pytest.mark.boundary
def test_a_default_name_unset_in_sandbx_does_not_appear_inside(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/usr/bin/env", "-0")
    inside = environment_inside(run)
    assert inside == {name: sbx.env[name] for name in DEFAULT_NAMES if name in sbx.env}
    assert run.record("spawned")["env"] == 7


@pytest.mark.boundary
def test_no_locale_variable_appears_inside_when_none_was_set(sbx: Sandbx) -> None:
    env = {name: value for name, value in sbx.env.items() if name != "LANG"}
    run = run_sandbx("sandbox-run", "--", "/usr/bin/env", "-0", cwd=sbx.workdir, env=env)
    assert environment_inside(run) == {"PATH": env["PATH"], "HOME": env["HOME"]}


@pytest.mark.boundary
def test_a_granted_name_sandbx_lacks_passes_nothing_but_still_counts(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("/usr/bin/env", "-0", flags=["--allow-env", "NOT_SET_ANYWHERE"])
    assert "NOT_SET_ANYWHERE" not in environment_inside(run)
    assert run.record("spawned")["env"] == 8


@pytest.mark.boundary
def test_allowing_a_default_name_again_does_not_count_it_twice(sbx: Sandbx) -> None:
    flags = ["--allow-env", "PATH", "--allow-env", "EXTRA", "--allow-env", "EXTRA"]
    run = sbx.sandbox_run("/usr/bin/env", "-0", flags=flags, EXTRA="x")
    assert environment_inside(run)["EXTRA"] == "x"
    assert run.record("spawned")["env"] == 8
