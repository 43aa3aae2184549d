"""``sandbx auth login|status|logout`` and the key agent-run uses, through the real CLI.

The key comes from ``ANTHROPIC_API_KEY`` when it is not blank, else from
``$XDG_CONFIG_HOME/sandbx/credentials.toml`` (or ``~/.config/…``), which ``login``
writes atomically at 0600 in a 0700 directory from stdin, never from a terminal.
A stored file anyone but its owner could reach, or someone else owns, or that is a
symlink, is refused with the way out. The key itself is never printed.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from sandbx.testing import ScriptedMessagesServer, reply, text_block
from tests.session.session_support import (
    ENV_KEY,
    STORED_KEY,
    assert_key_never_shown,
    credential_file,
    login,
    mode_of,
    run_sandbx,
)
from tests.support import SANDBX, Run, Sandbx, running_as_root

NO_KEY = "no key: export ANTHROPIC_API_KEY, or run `sandbx auth login`\n"


def status(sbx: Sandbx, **env: str) -> Run:
    run = run_sandbx(sbx, "auth", "status", **env)
    assert_key_never_shown(run)
    assert "Traceback" not in run.stderr
    return run


def assert_from_file(run: Run, path: Path) -> None:
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"a key from the credential file {path}\n"


def assert_from_environment(run: Run) -> None:
    assert run.returncode == 0, run.stderr
    assert run.stdout == "a key from the environment (ANTHROPIC_API_KEY)\n"


def assert_file_refused(run: Run, *fragments: str) -> None:
    """Exit 2, one ``sandbx:`` line naming the file's problem and the way out."""
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("sandbx: refusing the credential file: "), run.stderr
    for fragment in fragments:
        assert fragment in lines[0]


# --- status: where the key comes from -------------------------------------------------


def test_status_without_a_key_anywhere_exits_1_and_says_how_to_give_one(sbx: Sandbx) -> None:
    run = status(sbx)

    assert run.returncode == 1
    assert run.stdout == NO_KEY
    assert not (sbx.home / ".config").exists()


def test_status_after_login_names_the_credential_file_and_exits_0(sbx: Sandbx) -> None:
    login_run = login(sbx)

    run = status(sbx)

    assert_key_never_shown(login_run)
    assert_from_file(run, credential_file(sbx))


def test_status_with_the_key_in_the_environment_names_the_environment(sbx: Sandbx) -> None:
    run = status(sbx, ANTHROPIC_API_KEY=ENV_KEY)

    assert_from_environment(run)


def test_the_environment_wins_over_a_stored_key(sbx: Sandbx) -> None:
    login(sbx)

    run = status(sbx, ANTHROPIC_API_KEY=ENV_KEY)

    assert_from_environment(run)


@pytest.mark.parametrize("blank", ["", " ", "\t \n"], ids=["empty", "space", "whitespace"])
def test_a_blank_environment_key_counts_as_absent(sbx: Sandbx, blank: str) -> None:
    without_file = status(sbx, ANTHROPIC_API_KEY=blank)
    login(sbx)
    with_file = status(sbx, ANTHROPIC_API_KEY=blank)

    assert without_file.returncode == 1
    assert without_file.stdout == NO_KEY
    assert_from_file(with_file, credential_file(sbx))


def test_status_reads_the_key_from_xdg_config_home_when_it_is_set(
    sbx: Sandbx, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    login(sbx, XDG_CONFIG_HOME=str(config))

    run = status(sbx, XDG_CONFIG_HOME=str(config))

    assert_from_file(run, config / "sandbx" / "credentials.toml")
    assert not credential_file(sbx).exists()
    assert not (sbx.home / ".config").exists()


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["whoami"],
        ["status", "extra"],
        ["status", "login"],
        ["--verbose", "status"],
        ["login", STORED_KEY],
    ],
    ids=["nothing", "unknown-word", "extra-word", "two-commands", "unknown-flag", "key-in-argv"],
)
def test_a_bad_auth_command_line_exits_64_and_stores_nothing(sbx: Sandbx, words: list[str]) -> None:
    run = run_sandbx(sbx, "auth", *words, stdin=STORED_KEY.encode())

    assert run.returncode == 64, run.stderr
    assert run.stdout == ""
    assert run.stderr.startswith("sandbx: sandbx auth: ")
    assert_key_never_shown(run)
    assert not credential_file(sbx).exists()
    assert "Traceback" not in run.stderr


# --- login ----------------------------------------------------------------------------


def test_login_refuses_a_terminal_on_stdin_and_stores_nothing(sbx: Sandbx) -> None:
    master, slave = os.openpty()
    try:
        process = subprocess.Popen(
            [*SANDBX, "auth", "login"],
            cwd=sbx.workdir,
            env=sbx.env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # Were it to read the terminal anyway, this is what it would find.
        os.write(master, f"{STORED_KEY}\n".encode())
        try:
            stdout, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=10)
    finally:
        os.close(slave)
        os.close(master)

    text = stderr.decode()
    assert process.returncode == 1, text
    assert stdout == b""
    assert "stdin is a terminal" in text
    assert "will not prompt" in text
    assert STORED_KEY not in text
    assert not credential_file(sbx).exists()


@pytest.mark.parametrize(
    "given",
    [b"", b"\n", b"   \t\n", b"two words\n", b"key\x07bell"],
    ids=["empty", "newline", "blank", "two-words", "control-character"],
)
def test_login_refuses_input_that_is_not_one_key(sbx: Sandbx, given: bytes) -> None:
    run = run_sandbx(sbx, "auth", "login", stdin=given)

    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("sandbx: stdin held no key"), run.stderr
    assert not credential_file(sbx).exists()


def test_login_refuses_more_than_any_key_could_be(sbx: Sandbx) -> None:
    run = run_sandbx(sbx, "auth", "login", stdin=b"k" * (16 * 1024 + 1))

    assert run.returncode == 1, run.stderr
    assert "longer than any API key" in run.stderr
    assert not credential_file(sbx).exists()


def test_a_refused_login_leaves_the_stored_key_as_it_was(sbx: Sandbx) -> None:
    login(sbx)
    before = credential_file(sbx).read_bytes()

    run = run_sandbx(sbx, "auth", "login", stdin=b"")

    assert run.returncode == 1
    assert credential_file(sbx).read_bytes() == before


@pytest.mark.parametrize(
    "umask", [0o000, 0o022, 0o077], ids=["umask-000", "umask-022", "umask-077"]
)
def test_login_writes_the_file_0600_in_a_directory_0700_whatever_the_umask(
    sbx: Sandbx, umask: int
) -> None:
    run = run_sandbx(sbx, "auth", "login", stdin=f"{STORED_KEY}\n".encode(), umask=umask)

    path = credential_file(sbx)
    assert run.returncode == 0, run.stderr
    assert run.stderr == f"sandbx: key stored in {path} (mode 0600)\n"
    assert_key_never_shown(run)
    assert mode_of(path) == 0o600
    assert mode_of(path.parent) == 0o700
    assert path.stat().st_uid == os.geteuid()
    assert tomllib.loads(path.read_text()) == {"api_key": STORED_KEY}
    assert sorted(os.listdir(path.parent)) == ["credentials.toml"]


def test_login_keeps_a_key_with_quotes_and_backslashes_exactly(sbx: Sandbx) -> None:
    key = 'sk-ant-"quoted"\\back\\slash'

    login(sbx, key)

    assert tomllib.loads(credential_file(sbx).read_text()) == {"api_key": key}


def test_login_replaces_a_stored_key_by_a_new_file_leaving_no_temporary(sbx: Sandbx) -> None:
    login(sbx, "sk-ant-the-old-key")
    path = credential_file(sbx)
    old_inode = path.stat().st_ino
    # Someone holding the old file open still reads the old key whole: the new key
    # arrives as a new file renamed over the old one, never as a rewrite in place.
    with path.open("rb") as held:
        login(sbx, STORED_KEY)
        assert tomllib.loads(held.read().decode()) == {"api_key": "sk-ant-the-old-key"}

    assert path.stat().st_ino != old_inode
    assert tomllib.loads(path.read_text()) == {"api_key": STORED_KEY}
    assert mode_of(path) == 0o600
    assert sorted(os.listdir(path.parent)) == ["credentials.toml"]
    assert_from_file(status(sbx), path)


def test_login_over_a_file_of_the_wrong_mode_leaves_one_of_mode_0600(sbx: Sandbx) -> None:
    login(sbx, "sk-ant-the-old-key")
    path = credential_file(sbx)
    path.chmod(0o644)

    login(sbx, STORED_KEY)

    assert mode_of(path) == 0o600
    assert_from_file(status(sbx), path)


def test_login_replaces_a_symlinked_credential_file_without_writing_through_it(
    sbx: Sandbx, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere.toml"
    target.write_text("precious = true\n")
    login(sbx, "sk-ant-the-old-key")
    path = credential_file(sbx)
    path.unlink()
    path.symlink_to(target)

    login(sbx, STORED_KEY)

    assert target.read_text() == "precious = true\n"
    assert not path.is_symlink()
    assert mode_of(path) == 0o600
    assert tomllib.loads(path.read_text()) == {"api_key": STORED_KEY}


def test_login_refuses_a_directory_others_can_reach_naming_the_chmod(sbx: Sandbx) -> None:
    directory = credential_file(sbx).parent
    directory.mkdir(parents=True)
    directory.chmod(0o755)

    run = run_sandbx(sbx, "auth", "login", stdin=STORED_KEY.encode())

    assert run.returncode == 1, run.stderr
    assert f"chmod 700 {directory}" in run.stderr
    assert not credential_file(sbx).exists()
    assert mode_of(directory) == 0o755


# --- reading refuses what is not private -----------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o602, 0o620], ids=oct)
def test_status_refuses_a_credential_file_others_can_reach_naming_the_chmod(
    sbx: Sandbx, mode: int
) -> None:
    login(sbx)
    path = credential_file(sbx)
    path.chmod(mode)

    run = status(sbx)

    assert_file_refused(run, f"(mode {mode:04o})", f"chmod 600 {path}", "sandbx auth logout")
    assert mode_of(path) == mode


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701, 0o707], ids=oct)
def test_status_refuses_a_directory_others_can_reach_naming_the_chmod(
    sbx: Sandbx, mode: int
) -> None:
    login(sbx)
    directory = credential_file(sbx).parent
    directory.chmod(mode)

    run = status(sbx)

    assert_file_refused(run, f"(mode {mode:04o})", f"chmod 700 {directory}")
    assert mode_of(directory) == mode


def test_status_refuses_a_symlinked_credential_file(sbx: Sandbx, tmp_path: Path) -> None:
    login(sbx)
    path = credential_file(sbx)
    # A private, well-formed key file: only the link itself is wrong.
    target = tmp_path / "private" / "credentials.toml"
    target.parent.mkdir(mode=0o700)
    path.rename(target)
    path.symlink_to(target)

    run = status(sbx)

    assert_file_refused(run, str(path), "symlink", f"remove {path}")


def test_status_refuses_a_symlinked_credential_directory(sbx: Sandbx, tmp_path: Path) -> None:
    login(sbx)
    directory = credential_file(sbx).parent
    moved = tmp_path / "moved"
    directory.rename(moved)
    directory.symlink_to(moved)

    run = status(sbx)

    assert_file_refused(run, str(directory), "symlink")


def test_status_refuses_a_credential_file_that_is_no_toml_with_exit_2(sbx: Sandbx) -> None:
    login(sbx)
    path = credential_file(sbx)
    path.write_text(f"api_key = {STORED_KEY}\n")  # unquoted: not TOML

    run = status(sbx)

    assert run.returncode == 2
    assert str(path) in run.stderr


@pytest.mark.skipif(not running_as_root(), reason="only root can give a file to someone else")
@pytest.mark.parametrize("which", ["file", "directory"])
def test_status_refuses_a_credential_file_someone_else_owns(sbx: Sandbx, which: str) -> None:
    login(sbx)
    path = credential_file(sbx) if which == "file" else credential_file(sbx).parent
    os.chown(path, 65534, 65534)

    run = status(sbx)

    assert_file_refused(run, str(path), "belongs to uid 65534")


def test_the_environment_key_is_used_even_beside_a_refused_file(sbx: Sandbx) -> None:
    login(sbx)
    credential_file(sbx).chmod(0o644)

    run = status(sbx, ANTHROPIC_API_KEY=ENV_KEY)

    assert_from_environment(run)


# --- logout -----------------------------------------------------------------------------


def test_logout_removes_the_stored_key(sbx: Sandbx) -> None:
    login(sbx)

    run = run_sandbx(sbx, "auth", "logout")

    assert run.returncode == 0, run.stderr
    assert run.stderr == f"sandbx: removed {credential_file(sbx)}\n"
    assert not credential_file(sbx).exists()
    assert status(sbx).returncode == 1


@pytest.mark.parametrize("mode", [0o644, 0o666, 0o000], ids=oct)
def test_logout_removes_a_stored_key_whose_modes_are_wrong(sbx: Sandbx, mode: int) -> None:
    login(sbx)
    credential_file(sbx).chmod(mode)
    credential_file(sbx).parent.chmod(0o755)

    run = run_sandbx(sbx, "auth", "logout")

    assert run.returncode == 0, run.stderr
    assert not credential_file(sbx).exists()
    assert status(sbx).stdout == NO_KEY


def test_logout_removes_a_symlink_and_not_what_it_points_at(sbx: Sandbx, tmp_path: Path) -> None:
    login(sbx)
    target = tmp_path / "elsewhere.toml"
    target.write_text("precious = true\n")
    credential_file(sbx).unlink()
    credential_file(sbx).symlink_to(target)

    run = run_sandbx(sbx, "auth", "logout")

    assert run.returncode == 0, run.stderr
    assert not credential_file(sbx).is_symlink()
    assert target.read_text() == "precious = true\n"


def test_logout_without_a_stored_key_says_so_and_exits_0(sbx: Sandbx) -> None:
    run = run_sandbx(sbx, "auth", "logout")

    assert run.returncode == 0, run.stderr
    assert run.stderr == "sandbx: no stored key\n"


# --- agent-run uses the same resolution -----------------------------------------------


def _sent_key(server: ScriptedMessagesServer) -> str:
    (request,) = server.requests
    if "x-api-key" in request.headers:
        return request.headers["x-api-key"]
    return request.headers["authorization"].removeprefix("Bearer ")


def _ask(sbx: Sandbx, server: ScriptedMessagesServer, **env: str) -> Run:
    run = sbx.run("agent-run", "--", "which key?", timeout=60, ANTHROPIC_BASE_URL=server.url, **env)
    assert_key_never_shown(run)
    return run


@pytest.mark.boundary
def test_agent_run_sends_the_stored_key_when_the_environment_has_none(sbx: Sandbx) -> None:
    login(sbx)

    with ScriptedMessagesServer([reply(text_block("Stored."))]) as server:
        run = _ask(sbx, server)

    assert run.returncode == 0, run.stderr
    assert run.stdout == "Stored.\n"
    assert _sent_key(server) == STORED_KEY


@pytest.mark.boundary
def test_agent_run_sends_the_stored_key_when_the_environment_key_is_blank(sbx: Sandbx) -> None:
    login(sbx)

    with ScriptedMessagesServer([reply(text_block("Stored."))]) as server:
        run = _ask(sbx, server, ANTHROPIC_API_KEY="  ")

    assert run.returncode == 0, run.stderr
    assert _sent_key(server) == STORED_KEY


@pytest.mark.boundary
def test_agent_run_sends_the_environment_key_over_a_stored_one(sbx: Sandbx) -> None:
    login(sbx)

    with ScriptedMessagesServer([reply(text_block("From the environment."))]) as server:
        run = _ask(sbx, server, ANTHROPIC_API_KEY=ENV_KEY)

    assert run.returncode == 0, run.stderr
    assert _sent_key(server) == ENV_KEY


@pytest.mark.boundary
def test_agent_run_refuses_a_credential_file_others_can_read_and_asks_nothing(
    sbx: Sandbx,
) -> None:
    login(sbx)
    path = credential_file(sbx)
    path.chmod(0o644)

    with ScriptedMessagesServer([reply(text_block("Never."))]) as server:
        run = _ask(sbx, server)

    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert f"chmod 600 {path}" in run.stderr
    assert server.requests == ()


@pytest.mark.boundary
def test_agent_run_without_any_key_asks_nothing(sbx: Sandbx) -> None:
    with ScriptedMessagesServer([reply(text_block("Never."))]) as server:
        run = _ask(sbx, server)

    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert server.requests == ()
