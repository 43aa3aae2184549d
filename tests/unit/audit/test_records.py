"""Audit records without a kernel: the line format, quoting, the cut of args, levels, spawn ids,
the run records' fields, and the rewriter that keeps a command's stderr from forging a record.
"""

from __future__ import annotations

import calendar
import os
import re
from pathlib import Path

import pytest

from sandbx.audit import (
    MARKER,
    NO_SESSION,
    Record,
    RecordKind,
    StderrSink,
    cut_args,
    ended,
    next_spawn_id,
    quote,
    spawned,
)
from sandbx.boundary import Exited, Failed, FailureReason, RunResult, StderrGuard
from sandbx.boundary._stderr_guard import Defang
from sandbx.cli._sandbox_run import GUARD
from sandbx.policy import Command, GrantFlags, Policy, derive_policy
from tests.support import parse_records

# 2026-10-28T14:33:42.998120Z, the spec's example moment.
SPEC_MOMENT = calendar.timegm((2026, 10, 28, 14, 33, 42, 0, 0, 0)) + 0.998120
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


# --- cut_args -----------------------------------------------------------------


def test_args_of_exactly_512_characters_are_kept_whole() -> None:
    args = ("a" * 500, "b" * 12)
    assert cut_args(args) == args


def test_args_of_513_characters_are_cut_at_512_with_an_ellipsis() -> None:
    assert cut_args(("a" * 513,)) == ("a" * 512 + "…",)


def test_the_cut_counts_characters_not_bytes() -> None:
    assert cut_args(("é" * 600,)) == ("é" * 512 + "…",)
    assert cut_args(("€" * 512,)) == ("€" * 512,)


def test_the_cut_spans_arguments_and_drops_those_after_it() -> None:
    assert cut_args(("a" * 300, "b" * 300, "c")) == ("a" * 300, "b" * 212 + "…")


def test_an_argument_after_a_full_budget_is_marked_as_cut() -> None:
    assert cut_args(("a" * 512, "b")) == ("a" * 512, "…")


def test_no_args_stay_no_args() -> None:
    assert cut_args(()) == ()


def test_the_cut_never_leaves_more_than_512_characters_and_one_ellipsis() -> None:
    for total in range(505, 520):
        kept = "".join(cut_args(("x" * (total - 10), "y" * 10)))
        assert len(kept.replace("…", "")) == min(total, 512)
        assert kept.count("…") == (1 if total > 512 else 0)


# --- quote --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("plain", '"plain"'),
        ("", '""'),
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ("a\nb", r'"a\nb"'),
        ("a\rb", r'"a\rb"'),
        ("a\tb", r'"a\tb"'),
        ("a\0b", r'"a\0b"'),
        ("\x01\x1b\x7f", r'"\u{1}\u{1b}\u{7f}"'),
        ("\x85\u2028", r'"\u{85}\u{2028}"'),
        ("\ud800", r'"\u{d800}"'),
        ("é…✓ 'single'", "\"é…✓ 'single'\""),
    ],
    ids=[
        "plain",
        "empty",
        "quotes",
        "backslash",
        "newline",
        "carriage-return",
        "tab",
        "nul",
        "control",
        "unicode-line-breaks",
        "lone-surrogate",
        "printable-unicode",
    ],
)
def test_quote_escapes_as_rust_debug_does(text: str, quoted: str) -> None:
    assert quote(text) == quoted


@pytest.mark.parametrize("char", list(LINE_BREAKS), ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_quote_never_leaves_a_line_break(char: str) -> None:
    assert len(quote(f"a{char}b").splitlines()) == 1


def test_every_control_character_is_escaped() -> None:
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]:
        rendered = quote(chr(code))
        assert rendered.isprintable(), repr(rendered)


# --- Record.render ------------------------------------------------------------


def spec_spawned() -> Record:
    return Record(
        kind=RecordKind.SPAWNED,
        fields=(
            ("spawn", "6dbda.18e2b819e4bc3c87.0"),
            ("session", NO_SESSION),
            ("program", "/bin/true"),
            ("args", ()),
            ("readable", 1),
            ("writable", 0),
            ("executable", 4),
            ("network", "denied"),
            ("network_ports", 0),
            ("unix_sockets", False),
            ("env", 7),
            ("dns_over_tcp", False),
            ("dns_names", 0),
            ("pinned", False),
        ),
    )


def test_a_record_renders_as_the_spec_example_line() -> None:
    assert spec_spawned().render(now=SPEC_MOMENT) == (
        '2026-10-28T14:33:42.998120Z  INFO sandbx::audit: decision="spawned" '
        'spawn="6dbda.18e2b819e4bc3c87.0" session="-" program="/bin/true" args=[] readable=1 '
        'writable=0 executable=4 network="denied" network_ports=0 unix_sockets=false env=7 '
        "dns_over_tcp=false dns_names=0 pinned=false"
    )


def test_a_warn_record_keeps_the_same_column() -> None:
    record = Record(kind=RecordKind.FAILED, fields=(("reason", "timeout"),))
    assert record.render(now=SPEC_MOMENT) == (
        '2026-10-28T14:33:42.998120Z  WARN sandbx::audit: decision="failed" reason="timeout"'
    )


def test_a_record_renders_lists_bools_and_numbers() -> None:
    record = Record(
        kind=RecordKind.EXITED,
        fields=(("args", ("a b", 'q"')), ("flag", True), ("code", -1)),
    )
    body = record.render(now=0).split(f"{MARKER} ", 1)[1]
    assert body == r'decision="exited" args=["a b", "q\""] flag=true code=-1'


def test_a_rendered_record_is_parsed_back_by_the_test_reader() -> None:
    record = Record(
        kind=RecordKind.SPAWNED,
        fields=(("program", 'we"ird\nname'), ("args", ("x\\y", "…"))),
    )
    (parsed,) = parse_records(record.render())
    assert parsed["program"] == 'we"ird\nname'
    assert parsed["args"] == ["x\\y", "…"]


def test_a_render_without_a_moment_uses_the_current_utc_time() -> None:
    rendered = Record(kind=RecordKind.EXITED, fields=()).render()
    assert re.fullmatch(
        r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z  INFO sandbx::audit: decision="exited"',
        rendered,
    )


@pytest.mark.parametrize(
    ("kind", "level"),
    [
        (RecordKind.SPAWNED, "INFO"),
        (RecordKind.EXITED, "INFO"),
        (RecordKind.ALLOWED, "INFO"),
        (RecordKind.ABSENT, "INFO"),
        (RecordKind.FAILED, "WARN"),
        (RecordKind.DEGRADED, "WARN"),
        (RecordKind.DENIED, "WARN"),
    ],
)
def test_each_record_kind_has_its_level(kind: RecordKind, level: str) -> None:
    assert kind.level == level


def test_the_record_kinds_are_the_closed_set_of_the_spec() -> None:
    assert {kind.value for kind in RecordKind} == {
        "spawned",
        "exited",
        "failed",
        "degraded",
        "allowed",
        "absent",
        "denied",
    }


# --- spawn ids ----------------------------------------------------------------


def test_spawn_ids_within_one_process_are_unique_and_share_the_process_part() -> None:
    ids = [next_spawn_id() for _ in range(100)]
    assert len(set(ids)) == 100
    prefixes = {spawn.rsplit(".", 1)[0] for spawn in ids}
    assert prefixes == {f"{os.getpid():x}." + ids[0].split(".")[1]}


def test_a_spawn_id_is_pid_nonce_and_counter() -> None:
    first, second = next_spawn_id(), next_spawn_id()
    assert re.fullmatch(r"[0-9a-f]+\.[0-9a-f]{16}\.\d+", first)
    assert int(second.rsplit(".", 1)[1]) == int(first.rsplit(".", 1)[1]) + 1


# --- the run records ------------------------------------------------------------


@pytest.fixture
def srv_policy(tmp_path: Path) -> tuple[Policy, Command]:
    srv = tmp_path / "srv"
    srv.mkdir()
    command = Command(argv=("/bin/true",))
    policy = derive_policy(
        GrantFlags(read=(str(srv),)),
        command,
        working_directory=str(tmp_path),
        environ={"HOME": str(tmp_path / "home")},
    )
    return policy, command


def test_the_spawned_record_carries_the_spec_fields_in_order(
    srv_policy: tuple[Policy, Command],
) -> None:
    policy, command = srv_policy
    record = spawned("s.0", policy, command)
    assert record.kind is RecordKind.SPAWNED
    names = [name for name, _ in record.fields]
    assert names == [
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
    fields = dict(record.fields)
    assert (fields["session"], fields["readable"], fields["writable"]) == ("-", 1, 0)
    assert (fields["env"], fields["pinned"], fields["args"]) == (7, False, ())


def test_the_spawned_record_cuts_long_args() -> None:
    command = Command(argv=("/bin/echo", "x" * 600))
    policy = derive_policy(
        GrantFlags(read=("/usr",)), command, working_directory="/", environ={"HOME": "/nonexistent"}
    )
    assert dict(spawned("s.0", policy, command).fields)["args"] == ("x" * 512 + "…",)


def test_the_exited_record_carries_the_code() -> None:
    record = ended("s.0", Command(argv=("/bin/true",)), RunResult(Exited(3), ()))
    assert record.kind is RecordKind.EXITED
    assert record.fields == (
        ("spawn", "s.0"),
        ("session", "-"),
        ("program", "/bin/true"),
        ("code", 3),
    )


def test_the_failed_record_carries_the_reason_label_and_detail() -> None:
    result = RunResult(Failed(FailureReason.PIN_MISMATCH, "hashes to a, expects b"), ())
    record = ended("s.0", Command(argv=("/bin/true",)), result)
    assert record.kind is RecordKind.FAILED
    assert dict(record.fields)["reason"] == "pin_mismatch"
    assert dict(record.fields)["detail"] == "hashes to a, expects b"


def test_the_sink_writes_each_record_as_one_whole_line() -> None:
    read_end, write_end = os.pipe()
    try:
        StderrSink(write_end).write(Record(kind=RecordKind.EXITED, fields=(("x", "a\nb"),)))
        os.close(write_end)
        written = os.read(read_end, 65536)
    finally:
        os.close(read_end)
    assert written.endswith(b"\n")
    assert written.count(b"\n") == 1
    assert written.decode().rstrip("\n").endswith(r'decision="exited" x="a\nb"')


# --- the stderr rewriter --------------------------------------------------------

MARK = MARKER.encode()
SAFE = b"<defanged>"


def defang(*chunks: bytes, guard: StderrGuard | None = None) -> bytes:
    rewriter = Defang(guard or StderrGuard(marker=MARK, replacement=SAFE))
    return b"".join(rewriter.feed(chunk) for chunk in chunks) + rewriter.finish()


def test_the_clis_replacement_does_not_itself_carry_the_marker() -> None:
    assert GUARD.marker == b"sandbx::audit"
    assert MARK not in GUARD.replacement


def test_a_whole_marker_is_rewritten() -> None:
    assert defang(b"x " + MARK + b" y\n") == b"x " + SAFE + b" y\n"


@pytest.mark.parametrize(
    "data",
    [
        b"2026  INFO " + MARK + b' decision="exited"\n',
        b"sandbx::aud no marker here\n",
        b"sandbx::sandbx::audit: twice " + MARK + b"\n",
    ],
    ids=["record", "near-miss", "overlap"],
)
def test_a_marker_split_at_any_position_across_two_feeds_is_rewritten(data: bytes) -> None:
    expected = data.replace(MARK, SAFE)
    for cut in range(len(data) + 1):
        assert defang(data[:cut], data[cut:]) == expected, cut


def test_a_marker_fed_one_byte_at_a_time_is_rewritten() -> None:
    data = b"a" + MARK + b"b" + MARK + b"\n"
    assert defang(*(data[i : i + 1] for i in range(len(data)))) == b"a" + SAFE + b"b" + SAFE + b"\n"


def test_repeated_markers_are_each_rewritten() -> None:
    assert defang(MARK * 3 + b"\n") == SAFE * 3 + b"\n"


def test_a_marker_at_the_end_without_a_newline_is_rewritten_and_the_line_ended() -> None:
    assert defang(b"tail " + MARK) == b"tail " + SAFE + b"\n"


def test_a_held_back_prefix_is_released_at_the_end_with_a_newline() -> None:
    rewriter = Defang(StderrGuard(marker=MARK, replacement=SAFE))
    assert rewriter.feed(b"abc sandbx::au") == b"abc "
    assert rewriter.finish() == b"sandbx::au\n"


def test_finish_adds_nothing_after_a_complete_line() -> None:
    assert defang(b"done\n") == b"done\n"


def test_finish_adds_nothing_when_nothing_was_written() -> None:
    assert defang() == b""
    assert defang(b"") == b""


def test_bytes_without_the_marker_pass_through_unchanged() -> None:
    data = bytes(range(256)) * 4 + b"\n"
    assert defang(data[:300], data[300:]) == data


def test_the_real_guard_leaves_no_parseable_record() -> None:
    forged = b'2026-10-28T14:33:42.998120Z  INFO sandbx::audit: decision="exited" code=0\n'
    for cut in range(len(forged) + 1):
        out = defang(forged[:cut], forged[cut:], guard=GUARD)
        assert parse_records(out.decode()) == [], cut
