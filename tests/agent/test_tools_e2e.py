"""The seven tools as the model calls them through ``sandbx agent-run``: real files, the
real boundary, the audit trail, and exactly what the model is told.

Every refusal is checked three ways: the model sees an error it can work around, the
trail records it, and the host shows nothing was read, written or reached.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from sandbx.testing import ScriptedMessagesServer, reply, text_block, tool_use_block
from tests.agent.agent_support import (
    KEY,
    SECRET,
    OpenWatch,
    agent_run,
    bodies,
    call_lines,
    records_of,
    tool_result,
)
from tests.support import Run, Sandbx

pytestmark = pytest.mark.boundary

READ_LIMIT = 256 * 1024
BASH_LIMIT = 64 * 1024


def _one_call(
    sbx: Sandbx, tool: str, arguments: dict[str, object], *flags: str
) -> tuple[Run, dict[str, object], ScriptedMessagesServer]:
    """One round calling ``tool``, then an answer; the run, the tool_result, the server."""
    script = [reply(tool_use_block(tool, arguments)), reply(text_block("Done."))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, *flags)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Done.\n"
    assert len(server.requests) == 2
    return run, tool_result(server, 0, 0), server


def _calls(
    sbx: Sandbx, calls: list[tuple[str, dict[str, object]]], *flags: str
) -> tuple[Run, list[dict[str, object]], ScriptedMessagesServer]:
    """One round per call, in order, then an answer; the run, every tool_result, the server."""
    script = [reply(tool_use_block(tool, arguments)) for tool, arguments in calls]
    script.append(reply(text_block("Done.")))
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, *flags)
    assert run.returncode == 0, run.stderr
    assert len(server.requests) == len(calls) + 1
    return run, [tool_result(server, index, 0) for index in range(len(calls))], server


def _state(path: Path) -> tuple[object, ...]:
    status = path.lstat()
    return (path.read_bytes(), status.st_ino, status.st_mtime_ns, status.st_ctime_ns)


def _nothing_sent_holds(server: ScriptedMessagesServer, text: str) -> bool:
    return all(text not in str(body) for body in bodies(server))


# --- reading outside the grants -------------------------------------------------------


def test_a_read_outside_every_grant_is_refused_before_any_file_system_access(
    sbx: Sandbx, outside: Path
) -> None:
    watch = OpenWatch(outside / "watched")
    secret = outside / "secret.txt"
    try:
        run, results, server = _calls(
            sbx,
            [
                ("read", {"path": "../outside/watched"}),
                ("read", {"path": str(secret)}),
                ("ls", {"path": str(outside)}),
                ("grep", {"path": "..", "pattern": "outside-secret"}),
                ("find", {"path": str(outside), "pattern": "secret"}),
            ],
        )
    finally:
        opened = watch.stop()
    assert not opened, "something opened a file outside every grant"

    parent = sbx.workdir.resolve().parent
    paths = [str(outside / "watched"), str(secret), str(outside), str(parent), str(outside)]
    for result, path in zip(results, paths, strict=True):
        assert result["is_error"] is True
        assert result["content"] == f"refused: {path} is outside every readable root of this run"
    assert call_lines(run) == [
        f"sandbx: {tool} {path} — refused by the policy: outside every readable root"
        for tool, path in zip(["read", "read", "ls", "grep", "find"], paths, strict=True)
    ]
    denied = records_of(run, "denied")
    assert [(r["tool"], r["path"], r["access"], r["reason"], r["session"]) for r in denied] == [
        (tool, path, "read", "outside every readable root", "-")
        for tool, path in zip(["read", "read", "ls", "grep", "find"], paths, strict=True)
    ]
    assert records_of(run, "allowed") == []
    assert [r["level"] for r in denied] == ["WARN"] * 5
    assert SECRET not in run.stdout + run.stderr
    assert _nothing_sent_holds(server, "nobody may read this")


def test_an_outside_path_that_does_not_exist_is_refused_the_same_way(
    sbx: Sandbx, outside: Path
) -> None:
    run, results, _ = _calls(
        sbx,
        [("read", {"path": "../outside/secret.txt"}), ("read", {"path": "../outside/nothing"})],
    )
    # The trail and the model are told the same of both: which outside paths exist stays unsaid.
    present, missing = results
    assert (
        present["content"]
        == f"refused: {outside}/secret.txt is outside every readable root of this run"
    )
    assert (
        missing["content"]
        == f"refused: {outside}/nothing is outside every readable root of this run"
    )
    assert [r["decision"] for r in run.records] == ["denied", "denied"]
    assert records_of(run, "absent") == []


def test_a_narrower_read_grant_keeps_the_agent_inside_it(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    (root / "src").mkdir()
    (root / "src" / "lib.py").write_text("x = 1\n")
    (root / "notes.txt").write_text("private notes\n")
    run, results, server = _calls(
        sbx,
        [("read", {"path": "notes.txt"}), ("read", {"path": "src/lib.py"})],
        "--allow-read",
        str(root / "src"),
    )
    refused, read = results
    assert refused["is_error"] is True
    assert (
        refused["content"]
        == f"refused: {root}/notes.txt is outside every readable root of this run"
    )
    assert read == {**read, "content": "x = 1\n", "is_error": False}
    assert [(r["decision"], r["path"]) for r in run.records] == [
        ("denied", f"{root}/notes.txt"),
        ("allowed", f"{root}/src/lib.py"),
    ]
    assert _nothing_sent_holds(server, "private notes")


def test_a_missing_file_inside_the_roots_is_absent_with_no_reason(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    run, result, _ = _one_call(sbx, "read", {"path": "missing.txt"})
    assert result["is_error"] is True
    assert result["content"] == f"{root}/missing.txt: no such file or directory"
    (record,) = run.records
    assert record["decision"] == "absent"
    assert record["path"] == f"{root}/missing.txt"
    assert record["session"] == "-"
    assert "reason" not in record
    assert call_lines(run) == [
        f"sandbx: read {root}/missing.txt — failed: no such file or directory"
    ]


# --- writing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write", {"path": "created.txt", "content": "should never exist\n"}),
        ("edit", {"path": "kept.txt", "old": "keep", "new": "lose"}),
    ],
)
def test_a_change_without_its_allow_tool_is_refused_and_the_disk_untouched(
    sbx: Sandbx, tool: str, arguments: dict[str, object]
) -> None:
    root = sbx.workdir.resolve()
    kept = root / "kept.txt"
    kept.write_text("keep this\n")
    before = _state(kept)
    absolute = {**arguments, "path": str(root / str(arguments["path"]))}
    run, result, _ = _one_call(sbx, tool, absolute)
    why = f"the `{tool}` tool is not approved for this run: pass --allow-tool {tool}"
    assert result["is_error"] is True
    assert result["content"] == f"refused: {why}"
    assert call_lines(run) == [f"sandbx: {tool} {absolute['path']} — refused: {why}"]
    assert not (root / "created.txt").exists()
    assert _state(kept) == before
    assert records_of(run, "allowed") == []


def test_the_line_for_a_call_the_gate_refused_names_the_absolute_path_too(sbx: Sandbx) -> None:
    # Every per-call line names the path as the policy judged it, so a person reading
    # stderr sees where a refused write was aimed, not the model's relative spelling.
    root = sbx.workdir.resolve()
    run, _, _ = _one_call(sbx, "write", {"path": "sub/../../elsewhere.txt", "content": "x"})
    (line,) = call_lines(run)
    assert line.startswith(f"sandbx: write {root.parent}/elsewhere.txt — refused: the `write` tool")


def test_a_write_creates_the_file_with_exactly_the_content_given(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    content = "line one\nünïcode ✓\n\ttabbed\n"
    run, result, _ = _one_call(
        sbx, "write", {"path": "docs/../notes.md", "content": content}, "--allow-tool", "write"
    )
    target = root / "notes.md"
    assert result == {**result, "is_error": False}
    assert result["content"] == f"wrote {len(content.encode())} bytes to {target}"
    assert target.read_text() == content
    assert call_lines(run) == [f"sandbx: write {target} — ran"]
    (record,) = run.records
    assert (record["decision"], record["tool"], record["path"], record["access"]) == (
        "allowed",
        "write",
        str(target),
        "write",
    )


def test_a_write_outside_every_writable_root_is_refused_by_the_policy(
    sbx: Sandbx, outside: Path
) -> None:
    root = sbx.workdir.resolve()
    (root / "out").mkdir()
    (root / "readme.txt").write_text("read only here\n")
    before = _state(root / "readme.txt")
    run, results, _ = _calls(
        sbx,
        [
            ("write", {"path": "../outside/new.txt", "content": "x"}),
            ("write", {"path": "/etc/hosts", "content": "x"}),
            ("write", {"path": "readme.txt", "content": "x"}),
            ("edit", {"path": "readme.txt", "old": "read", "new": "write"}),
        ],
        "--allow-tool",
        "write",
        "--allow-tool",
        "edit",
        "--allow-read",
        str(root),
        "--allow-write",
        str(root / "out"),
    )
    tools = ["write", "write", "write", "edit"]
    paths = [f"{outside}/new.txt", "/etc/hosts", f"{root}/readme.txt", f"{root}/readme.txt"]
    for result, path in zip(results, paths, strict=True):
        assert result["is_error"] is True
        assert result["content"] == f"refused: {path} is outside every writable root of this run"
    assert call_lines(run) == [
        f"sandbx: {tool} {path} — refused by the policy: outside every writable root"
        for tool, path in zip(tools, paths, strict=True)
    ]
    assert [
        (r["decision"], r["tool"], r["path"], r["access"], r["reason"]) for r in run.records
    ] == [
        ("denied", tool, path, "write", "outside every writable root")
        for tool, path in zip(tools, paths, strict=True)
    ]
    assert not (outside / "new.txt").exists()
    assert _state(root / "readme.txt") == before


def test_a_write_never_goes_through_a_symlink_at_the_leaf(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    target = root / "target.txt"
    target.write_text("the original\n")
    (root / "link.txt").symlink_to("target.txt")
    before = _state(target)
    run, result, _ = _one_call(
        sbx, "write", {"path": "link.txt", "content": "through the link\n"}, "--allow-tool", "write"
    )
    assert result["is_error"] is True
    assert _state(target) == before
    assert os.readlink(root / "link.txt") == "target.txt"
    (line,) = call_lines(run)
    assert line.startswith(f"sandbx: write {root}/link.txt — refused by the kernel: ")
    (record,) = run.records
    assert (record["decision"], record["path"], record["access"]) == (
        "denied",
        f"{root}/link.txt",
        "write",
    )


# --- edit -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "found"),
    [("x = 1", "occurs 2 times"), ("y = 2", "does not occur")],
    ids=["two-occurrences", "zero-occurrences"],
)
def test_edit_that_does_not_match_exactly_once_leaves_the_file_untouched(
    sbx: Sandbx, old: str, found: str
) -> None:
    root = sbx.workdir.resolve()
    target = root / "config.py"
    target.write_text("x = 1\nprint(x)\nx = 1\n")
    before = _state(target)
    run, result, _ = _one_call(
        sbx, "edit", {"path": "config.py", "old": old, "new": "z = 3"}, "--allow-tool", "edit"
    )
    assert result["is_error"] is True
    assert result["content"] == (
        f"{target} left untouched: `old` {found}; it must occur exactly once"
    )
    assert _state(target) == before
    assert call_lines(run) == [f"sandbx: edit {target} — failed: `old` {found}"]
    (record,) = run.records
    assert (record["decision"], record["tool"], record["access"]) == ("allowed", "edit", "write")


def test_edit_replaces_the_one_occurrence_and_nothing_else(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    target = root / "greeting.txt"
    target.write_text("hello world\nhello there\n")
    _, result, _ = _one_call(
        sbx,
        "edit",
        {"path": "greeting.txt", "old": "hello world", "new": "goodbye world, longer now"},
        "--allow-tool",
        "edit",
    )
    assert result["is_error"] is False
    assert target.read_text() == "goodbye world, longer now\nhello there\n"


def test_edit_shortening_a_file_leaves_no_stale_tail(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    target = root / "long.txt"
    target.write_text("keep\n" + "remove me " * 100 + "\nend\n")
    _, result, _ = _one_call(
        sbx,
        "edit",
        {"path": "long.txt", "old": "remove me " * 100, "new": ""},
        "--allow-tool",
        "edit",
    )
    assert result["is_error"] is False
    assert target.read_bytes() == b"keep\n\nend\n"


# --- read -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"caf\xe9 au lait\n", b"\xff\xfe\x00t\x00e"],
    ids=["png", "latin-1", "utf-16"],
)
def test_read_of_a_binary_or_non_utf8_file_is_a_clear_failure(sbx: Sandbx, data: bytes) -> None:
    root = sbx.workdir.resolve()
    (root / "blob.bin").write_bytes(data)
    run, result, server = _one_call(sbx, "read", {"path": "blob.bin"})
    assert result["is_error"] is True
    assert (
        result["content"] == f"{root}/blob.bin is binary or not UTF-8; read shows text files only"
    )
    assert call_lines(run) == [f"sandbx: read {root}/blob.bin — failed: not a text file"]
    assert records_of(run, "allowed")[0]["path"] == f"{root}/blob.bin"
    assert _nothing_sent_holds(server, "lait")


def test_read_of_an_empty_file_says_no_output(sbx: Sandbx) -> None:
    (sbx.workdir / "empty.txt").write_bytes(b"")
    _, result, _ = _one_call(sbx, "read", {"path": "empty.txt"})
    assert result["is_error"] is False
    assert result["content"] == "(no output)"


def test_read_of_a_long_file_is_cut_at_256_kib_with_a_marker(sbx: Sandbx) -> None:
    size = READ_LIMIT + 40_000
    line = "0123456789abcdef" * 4 + "\n"
    text = (line * (size // len(line) + 1))[:size]
    (sbx.workdir / "big.txt").write_text(text)
    _, result, _ = _one_call(sbx, "read", {"path": "big.txt"})
    assert result["is_error"] is False
    assert result["content"] == (
        text[:READ_LIMIT] + f"\n[output cut: {READ_LIMIT} of {size} bytes shown]"
    )


# --- ls, grep, find ---------------------------------------------------------------------


def test_ls_lists_sorted_names_with_directories_marked(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    for name in ("zeta.txt", "Alpha.txt", ".hidden", "beta.md"):
        (root / name).write_text(name)
    for name in ("src", "docs"):
        (root / name).mkdir()
    (root / "empty").mkdir()
    (root / "docs-link").symlink_to("docs")
    _, results, _ = _calls(sbx, [("ls", {"path": "."}), ("ls", {"path": "empty"})])
    listing, empty = results
    assert listing["content"] == (
        ".hidden\nAlpha.txt\nbeta.md\ndocs-link\ndocs/\nempty/\nsrc/\nzeta.txt"
    )
    assert empty["content"] == "(empty directory)"


def test_grep_is_literal_and_prints_path_line_and_text(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    (root / "a.txt").write_text("first\nthe a.c file\nabc is not a match\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("a.c again\n")
    (root / "blob.bin").write_bytes(b"\x00a.c\x00")
    _, result, _ = _one_call(sbx, "grep", {"path": ".", "pattern": "a.c"})
    assert result["is_error"] is False
    assert sorted(str(result["content"]).splitlines()) == [
        f"{root}/a.txt:2: the a.c file",
        f"{root}/sub/b.txt:1: a.c again",
    ]


def test_grep_with_no_match_says_so(sbx: Sandbx) -> None:
    (sbx.workdir / "a.txt").write_text("nothing here\n")
    _, result, _ = _one_call(sbx, "grep", {"path": ".", "pattern": "needle"})
    assert result == {**result, "content": "(no matches)", "is_error": False}


def test_grep_stops_at_200_matches_with_a_marker(sbx: Sandbx) -> None:
    (sbx.workdir / "many.txt").write_text("hit\n" * 450)
    _, result, _ = _one_call(sbx, "grep", {"path": "many.txt", "pattern": "hit"})
    lines = str(result["content"]).splitlines()
    assert len(lines) == 201
    assert lines[-1] == "[stopped at 200 matches]"


def test_find_lists_a_tree_depth_first_in_sorted_order(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    (root / "b_dir").mkdir()
    (root / "b_dir" / "b_one.txt").write_text("")
    (root / "b_dir" / "a_two.txt").write_text("")
    (root / "a_file.txt").write_text("")
    (root / "c_file.txt").write_text("")
    _, result, _ = _one_call(sbx, "find", {"path": ".", "pattern": "_"})
    assert str(result["content"]).splitlines() == [
        f"{root}/a_file.txt",
        f"{root}/b_dir/",
        f"{root}/b_dir/a_two.txt",
        f"{root}/b_dir/b_one.txt",
        f"{root}/c_file.txt",
    ]


def test_find_matches_names_not_paths_and_says_when_nothing_is_found(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    (root / "tests").mkdir()
    (root / "tests" / "unit.py").write_text("")
    _, results, _ = _calls(
        sbx,
        [
            ("find", {"path": ".", "pattern": "unit"}),
            ("find", {"path": ".", "pattern": "nothing-like-this"}),
        ],
    )
    assert results[0]["content"] == f"{root}/tests/unit.py"
    assert results[1]["content"] == "(nothing found)"


# --- bash -----------------------------------------------------------------------------


def test_bash_is_refused_unless_approved_and_nothing_runs(sbx: Sandbx) -> None:
    run, result, _ = _one_call(sbx, "bash", {"command": "touch ran.txt"})
    why = "the `bash` tool is not approved for this run: pass --allow-tool bash"
    assert result["is_error"] is True
    assert result["content"] == f"refused: {why}"
    assert call_lines(run) == [f"sandbx: bash — refused: {why}"]
    assert run.records == []
    assert not (sbx.workdir / "ran.txt").exists()


def test_bash_runs_in_the_project_and_writes_spawned_and_exited_records(sbx: Sandbx) -> None:
    command = "echo hello > made.txt && cat made.txt && pwd"
    run, result, _ = _one_call(sbx, "bash", {"command": command}, "--allow-tool", "bash")
    root = sbx.workdir.resolve()
    assert result == {**result, "content": f"hello\n{root}\n", "is_error": False}
    assert (root / "made.txt").read_text() == "hello\n"
    assert call_lines(run) == ["sandbx: bash — ran"]
    spawned, exited = run.records
    assert spawned["decision"] == "spawned"
    assert spawned["session"] == "-"
    assert spawned["program"] == "/bin/sh"
    assert spawned["args"] == ["-c", command]
    assert spawned["network"] == "denied"
    assert exited["decision"] == "exited"
    assert exited["spawn"] == spawned["spawn"]
    assert exited["session"] == "-"
    assert exited["code"] == 0


def test_bash_cannot_read_etc_shadow_or_write_outside(sbx: Sandbx, outside: Path) -> None:
    command = f"cat /etc/shadow; echo leaked > {outside}/new.txt; cat {outside}/secret.txt"
    run, result, server = _one_call(sbx, "bash", {"command": command}, "--allow-tool", "bash")
    content = str(result["content"])
    assert "cat: /etc/shadow: Permission denied\n" in content, content
    assert f"cannot create {outside}/new.txt" in content, content
    assert f"cat: {outside}/secret.txt: Permission denied\n" in content, content
    assert content.endswith("\n[exit code 1]"), content
    assert result["is_error"] is True
    assert not (outside / "new.txt").exists()
    assert SECRET.strip() not in content
    assert _nothing_sent_holds(server, "root:")
    assert [r["decision"] for r in run.records] == ["spawned", "exited"]
    assert all(r["session"] == "-" for r in run.records)


def test_bash_has_no_network_not_even_a_listener_on_the_hosts_loopback(sbx: Sandbx) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)  # noqa: FBT003 - the socket API
        port = listener.getsockname()[1]
        probe = (
            "import errno, socket\n"
            "s = socket.socket()\n"
            "s.settimeout(5)\n"
            "try:\n"
            f"    s.connect(('127.0.0.1', {port}))\n"
            "    print('CONNECTED')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode.get(e.errno, e.errno), e.strerror)\n"
            "    raise SystemExit(7)\n"
        )
        command = f"python3 - <<'EOF'\n{probe}EOF\n"
        run, result, _ = _one_call(sbx, "bash", {"command": command}, "--allow-tool", "bash")
        # Nothing arrived at the listener the host could reach.
        with pytest.raises(BlockingIOError):
            listener.accept()
    content = str(result["content"])
    assert "CONNECTED" not in content
    assert "Network is unreachable" in content or "Permission denied" in content, content
    assert content.endswith("[exit code 7]")
    assert result["is_error"] is True
    assert call_lines(run) == ["sandbx: bash — ran, exit code 7"]
    assert [r["decision"] for r in run.records] == ["spawned", "exited"]
    assert run.records[0]["network"] == "denied"
    assert run.records[1]["code"] == 7
    assert all(r["session"] == "-" for r in run.records)


def test_bash_can_neither_resolve_a_name_nor_reach_an_address_on_the_internet(
    sbx: Sandbx,
) -> None:
    probe = (
        "import errno, socket\n"
        "try:\n"
        "    print('RESOLVED', socket.getaddrinfo('example.com', 443))\n"
        "except OSError as e:\n"
        "    print('resolve:', e)\n"
        "s = socket.socket()\n"
        "s.settimeout(5)\n"
        "try:\n"
        "    s.connect(('1.1.1.1', 443))\n"
        "    print('CONNECTED')\n"
        "except OSError as e:\n"
        "    print('connect:', errno.errorcode.get(e.errno, e.errno), e.strerror)\n"
    )
    command = f"python3 - <<'EOF'\n{probe}EOF\n"
    _, result, _ = _one_call(sbx, "bash", {"command": command}, "--allow-tool", "bash")
    content = str(result["content"])
    assert "RESOLVED" not in content
    assert "CONNECTED" not in content
    assert "resolve: " in content, content
    assert (
        "connect: ENETUNREACH Network is unreachable" in content
        or "connect: EACCES Permission denied" in content
    ), content


def test_bash_nonzero_exit_is_reported_with_its_code(sbx: Sandbx) -> None:
    run, result, _ = _one_call(
        sbx, "bash", {"command": "echo out; echo err >&2; exit 3"}, "--allow-tool", "bash"
    )
    content = str(result["content"])
    assert result["is_error"] is True
    assert "out\n" in content
    assert "err\n" in content
    assert content.endswith("\n[exit code 3]")
    assert call_lines(run) == ["sandbx: bash — ran, exit code 3"]
    assert run.records[-1]["decision"] == "exited"
    assert run.records[-1]["code"] == 3


def test_bash_never_sees_the_api_key_or_the_base_url(sbx: Sandbx) -> None:
    run, result, _ = _one_call(sbx, "bash", {"command": "env"}, "--allow-tool", "bash")
    content = str(result["content"])
    assert KEY not in content
    assert "ANTHROPIC" not in content
    assert KEY not in run.stderr + run.stdout


def test_bash_output_is_cut_at_64_kib_with_a_marker(sbx: Sandbx) -> None:
    _, result, _ = _one_call(
        sbx, "bash", {"command": "yes abcdefg | head -c 100000"}, "--allow-tool", "bash"
    )
    content = str(result["content"])
    assert result["is_error"] is False
    assert content == ("abcdefg\n" * 12500)[:BASH_LIMIT] + (
        f"\n[output cut: {BASH_LIMIT} of 100000 bytes shown]"
    )


def test_bash_past_its_timeout_is_killed_and_recorded_as_failed(sbx: Sandbx) -> None:
    run, result, _ = _one_call(
        sbx, "bash", {"command": "echo started; sleep 30", "timeout": 1}, "--allow-tool", "bash"
    )
    assert result["is_error"] is True
    assert str(result["content"]).startswith("started\n")
    assert "[sandbx: timeout:" in str(result["content"])
    assert call_lines(run) == ["sandbx: bash — failed: timeout"]
    assert [r["decision"] for r in run.records] == ["spawned", "failed"]
    assert run.records[1]["reason"] == "timeout"


# --- a symlink planted from inside ---------------------------------------------------------


def test_a_symlink_bash_plants_to_the_outside_is_refused_by_the_kernel_when_read(
    sbx: Sandbx, outside: Path
) -> None:
    root = sbx.workdir.resolve()
    plant = "ln -s ../outside/secret.txt planted && ln -s ../outside planted_dir && ls -l"
    run, results, server = _calls(
        sbx,
        [
            ("bash", {"command": plant}),
            ("read", {"path": "planted"}),
            ("read", {"path": "planted_dir/secret.txt"}),
            ("ls", {"path": "planted_dir"}),
            ("grep", {"path": ".", "pattern": "outside-secret"}),
            ("bash", {"command": "cat planted"}),
        ],
        "--allow-tool",
        "bash",
    )
    assert os.readlink(root / "planted") == "../outside/secret.txt"
    planted, through_dir, listing, grep, cat = results[1:]

    # The lexical check passes (the link is inside the root); the kernel refuses.
    for result, path in [
        (planted, f"{root}/planted"),
        (through_dir, f"{root}/planted_dir/secret.txt"),
        (listing, f"{root}/planted_dir"),
    ]:
        assert result["is_error"] is True
        assert result["content"] == f"{path}: Permission denied"
    assert grep == {**grep, "content": "(no matches)", "is_error": False}
    assert cat["is_error"] is True
    assert "Permission denied" in str(cat["content"])

    denied = records_of(run, "denied")
    assert [(r["tool"], r["path"], r["reason"], r["session"]) for r in denied] == [
        ("read", f"{root}/planted", "Permission denied", "-"),
        ("read", f"{root}/planted_dir/secret.txt", "Permission denied", "-"),
        ("ls", f"{root}/planted_dir", "Permission denied", "-"),
    ]
    assert f"sandbx: read {root}/planted — refused by the kernel: Permission denied" in (
        call_lines(run)
    )
    assert SECRET.strip() not in run.stdout + run.stderr
    assert _nothing_sent_holds(server, "nobody may read this")
    assert (outside / "secret.txt").read_text() == SECRET
