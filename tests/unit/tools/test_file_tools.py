"""What each file tool does with a path the kernel lets it reach: the worker's side, unconfined.

The confinement itself is proven end to end in tests/agent; these pin the tools' own behaviour.
"""

import os
from pathlib import Path

import pytest

from sandbx.tools import _edit, _find, _grep, _ls, _read, _write
from sandbx.tools._base import OUTPUT_LIMIT, AccessKind, Roots, ToolArgumentError
from sandbx.tools._dispatch import decode_outcome, encode_outcome, encode_request, handle


def test_read_returns_the_text(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    outcome = _read.in_worker({}, str(tmp_path / "a.txt"))
    assert (outcome.text, outcome.is_error) == ("hello\n", False)
    assert [a.kind for a in outcome.accesses] == [AccessKind.ALLOWED]


def test_read_of_an_empty_file_says_no_output(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    assert _read.in_worker({}, str(tmp_path / "empty")).text == "(no output)"


def test_read_cuts_a_long_file_and_says_how_much_was_shown(tmp_path: Path) -> None:
    (tmp_path / "big").write_text("x" * (OUTPUT_LIMIT + 10))
    outcome = _read.in_worker({}, str(tmp_path / "big"))
    assert outcome.text.startswith("x" * OUTPUT_LIMIT)
    assert f"[output cut: {OUTPUT_LIMIT} of {OUTPUT_LIMIT + 10} bytes shown]" in outcome.text


@pytest.mark.parametrize("content", [b"\x00\x01binary", b"caf\xe9 latin-1"])
def test_read_refuses_binary_and_non_utf8(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "bin").write_bytes(content)
    outcome = _read.in_worker({}, str(tmp_path / "bin"))
    assert outcome.is_error
    assert "binary or not UTF-8" in outcome.text


def test_a_missing_file_is_absent_not_denied(tmp_path: Path) -> None:
    outcome = _read.in_worker({}, str(tmp_path / "nope"))
    assert outcome.is_error
    assert [a.kind for a in outcome.accesses] == [AccessKind.ABSENT]


def test_write_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "new.txt"
    assert not _write.in_worker({"content": "one"}, str(target)).is_error
    assert not _write.in_worker({"content": "two"}, str(target)).is_error
    assert target.read_text() == "two"


def test_write_refuses_a_symlink_leaf_and_leaves_its_target_alone(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("original")
    (tmp_path / "link").symlink_to(target)
    outcome = _write.in_worker({"content": "changed"}, str(tmp_path / "link"))
    assert outcome.is_error
    assert target.read_text() == "original"


def test_edit_replaces_the_one_occurrence(tmp_path: Path) -> None:
    target = tmp_path / "f.py"
    target.write_text("a = 1\nb = 2\n")
    outcome = _edit.in_worker({"old": "b = 2", "new": "b = 3"}, str(target))
    assert not outcome.is_error
    assert target.read_text() == "a = 1\nb = 3\n"


@pytest.mark.parametrize(
    ("content", "says"), [("x\n", "does not occur"), ("y y\n", "occurs 2 times")]
)
def test_edit_leaves_the_file_untouched_unless_old_occurs_once(
    tmp_path: Path, content: str, says: str
) -> None:
    target = tmp_path / "f.txt"
    target.write_text(content)
    outcome = _edit.in_worker({"old": "y", "new": "z"}, str(target))
    assert outcome.is_error
    assert says in outcome.text
    assert target.read_text() == content


def test_edit_shrinking_a_file_leaves_no_tail(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("long long long\n")
    _edit.in_worker({"old": "long long long", "new": "s"}, str(target))
    assert target.read_text() == "s\n"


def test_ls_sorts_and_marks_directories(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a.txt").write_text("")
    assert _ls.in_worker({}, str(tmp_path)).text == "a.txt\nb/"


def test_grep_finds_literal_text_with_path_and_line(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n# TODO: a.b\n")
    (tmp_path / "src" / "bin").write_bytes(b"\x00TODO")
    outcome = _grep.in_worker({"pattern": "a.b"}, str(tmp_path))
    assert outcome.text == f"{tmp_path}/src/m.py:2: # TODO: a.b"


def test_grep_does_not_follow_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("TODO secret\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "escape").symlink_to(outside)
    (root / "file-link").symlink_to(outside / "secret")
    assert _grep.in_worker({"pattern": "TODO"}, str(root)).text == "(no matches)"


def test_grep_stops_at_its_result_bound_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "many").write_text("hit\n" * (_grep.RESULT_LIMIT + 5))
    outcome = _grep.in_worker({"pattern": "hit"}, str(tmp_path))
    assert outcome.text.count("hit") == _grep.RESULT_LIMIT
    assert f"[stopped at {_grep.RESULT_LIMIT} matches]" in outcome.text


def test_find_lists_names_containing_the_pattern(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "readme.md").write_text("")
    (tmp_path / "other.txt").write_text("")
    outcome = _find.in_worker({"pattern": "read"}, str(tmp_path))
    assert outcome.text == f"{tmp_path}/docs/readme.md"


def test_a_request_survives_the_worker_protocol(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("café\n")
    response = handle(encode_request("read", {"path": "a.txt"}, str(tmp_path / "a.txt")))
    assert decode_outcome(response) == _read.in_worker({}, str(tmp_path / "a.txt"))
    assert decode_outcome(encode_outcome(decode_outcome(response))).text == "café\n"


def test_paths_outside_every_root_are_told_apart_lexically(tmp_path: Path) -> None:
    roots = Roots(readable=("/srv",), writable=("/srv/out",), working_directory="/srv/out")
    assert roots.absolute("../in/x") == "/srv/in/x"
    assert roots.readable_root_of("/srv/in/x")
    assert not roots.writable_root_of("/srv/in/x")
    assert not roots.readable_root_of("/srv2/x")
    assert not roots.readable_root_of(roots.absolute("../../etc/passwd"))


@pytest.mark.parametrize("arguments", [{}, {"path": 3}, {"path": ""}, {"path": "a\0b"}])
def test_a_bad_path_argument_is_refused(arguments: dict[str, object]) -> None:
    with pytest.raises(ToolArgumentError):
        _read.validate(arguments)


def test_write_validates_content_too() -> None:
    with pytest.raises(ToolArgumentError, match="content"):
        _write.validate({"path": "x"})
    assert _write.validate({"path": "x", "content": ""}) == "x"


def test_the_tools_never_leave_a_descriptor_open(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a\n")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        _read.in_worker({}, str(tmp_path / "a"))
        _edit.in_worker({"old": "zz", "new": "y"}, str(tmp_path / "a"))
        _ls.in_worker({}, str(tmp_path))
    assert len(os.listdir("/proc/self/fd")) == before
