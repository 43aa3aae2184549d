"""The README's first promise: a real command runs in the project directory, records follow."""

from tests.support import Sandbx


def test_grep_in_the_working_directory_finds_the_todo(sbx: Sandbx) -> None:
    (sbx.workdir / "notes.txt").write_text("one\nTODO: two\n")
    run = sbx.sandbox_run("grep", "-rn", "TODO", ".")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "./notes.txt:2:TODO: two\n"
    assert [r["decision"] for r in run.records] == ["spawned", "exited"]
