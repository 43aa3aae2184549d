"""The seven tools as the agent sees them: their specs, and one ``run`` that routes each call.

File tools are checked lexically against the run's roots, then run in the
confined worker; ``bash`` runs through the spawner, the same boundary as
``sandbox-run``. Every access and every run is written to the audit trail.
Start it before any thread exists: it forks the worker and the spawner.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from sandbx import audit
from sandbx._value import value
from sandbx.boundary import FileWorker, Spawner
from sandbx.policy import Command, Policy
from sandbx.tools import _bash, _dispatch, _edit, _find, _grep, _ls, _read, _write
from sandbx.tools._base import Roots, ToolArgumentError, ToolOutcome, refused_outside

FILE_TOOLS: dict[str, ModuleType] = {
    module.NAME: module for module in (_read, _write, _edit, _ls, _grep, _find)
}
TOOL_NAMES = ("read", "write", "edit", "ls", "grep", "find", "bash")
READ_ONLY_TOOLS = frozenset({"read", "ls", "grep", "find"})


@value
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, object]


SPECS = tuple(
    ToolSpec(name=module.NAME, description=module.DESCRIPTION, input_schema=module.INPUT_SCHEMA)
    for module in (_read, _write, _edit, _ls, _grep, _find, _bash)
)


class ToolBox:
    def __init__(
        self,
        *,
        policy: Policy,
        roots: Roots,
        spawner: Spawner,
        worker: FileWorker,
        sink: audit.StderrSink,
        session: Callable[[], str],
    ) -> None:
        self._policy = policy
        self._roots = roots
        self._spawner = spawner
        self._worker = worker
        self._sink = sink
        self._session = session

    @classmethod
    def start(
        cls,
        policy: Policy,
        *,
        working_directory: str,
        sink: audit.StderrSink,
        session: Callable[[], str],
        commands_expected: bool = True,
    ) -> ToolBox:
        """Fork the worker and the spawner. ``commands_expected`` (``bash`` is approved)
        lets the spawner keep the next call's sandbox prepared."""
        worker = FileWorker.start(policy, _dispatch.handle)
        spawner = Spawner.start(policy, prepare_ahead=commands_expected)
        return cls(
            policy=policy,
            roots=Roots.of(policy, working_directory),
            spawner=spawner,
            worker=worker,
            sink=sink,
            session=session,
        )

    def run(self, name: str, arguments: dict[str, object]) -> ToolOutcome:
        try:
            if name == _bash.NAME:
                return self._run_bash(arguments)
            if name in FILE_TOOLS:
                return self._run_file_tool(FILE_TOOLS[name], arguments)
        except ToolArgumentError as exc:
            return ToolOutcome(
                text=f"bad arguments for {name}: {exc}",
                is_error=True,
                verdict=f"refused: bad arguments ({exc})",
            )
        return ToolOutcome(
            text=f"there is no tool named {name!r}; the tools are {', '.join(TOOL_NAMES)}",
            is_error=True,
            verdict="refused: no such tool",
        )

    def subject_of(self, name: str, arguments: dict[str, object]) -> str:
        """The absolute path a file tool call names, for the line about it; "" if none."""
        typed = arguments.get("path")
        if name not in FILE_TOOLS or not isinstance(typed, str) or not typed or "\0" in typed:
            return ""
        return self._roots.absolute(typed)

    def interrupt(self) -> None:
        """Kill a running bash command; a file tool call finishes first."""
        self._spawner.interrupt()

    def close(self) -> None:
        self._worker.close()
        self._spawner.close()

    def _run_file_tool(self, module: ModuleType, arguments: dict[str, object]) -> ToolOutcome:
        typed_path: str = module.validate(arguments)
        path = self._roots.absolute(typed_path)
        if module.ACCESS == "write":
            inside = self._roots.writable_root_of(path)
        else:
            inside = self._roots.readable_root_of(path)
        if not inside:
            outcome = refused_outside(
                path, module.ACCESS, "writable" if module.ACCESS == "write" else "readable"
            )
        else:
            outcome = _dispatch.decode_outcome(
                self._worker.call(_dispatch.encode_request(module.NAME, arguments, path))
            )
        outcome = outcome.about(path)
        for access in outcome.accesses:
            self._sink.write(
                audit.file_access(
                    access.kind.value,
                    tool=module.NAME,
                    path=access.path,
                    access=access.access,
                    reason=access.reason,
                    session=self._session(),
                )
            )
        return outcome

    def _run_bash(self, arguments: dict[str, object]) -> ToolOutcome:
        command_text, timeout = _bash.validate(arguments)
        command = Command(argv=_bash.argv_for(command_text))
        spawn = audit.next_spawn_id()
        session = self._session()
        self._sink.write(audit.spawned(spawn, self._policy, command, session))
        result = self._spawner.run(
            command.argv, timeout_seconds=timeout, output_limit=_bash.OUTPUT_LIMIT
        )
        for what in result.degraded:
            self._sink.write(audit.degraded(spawn, what, session))
        self._sink.write(audit.ended(spawn, command, result, session))
        return _bash.outcome_of(result)
