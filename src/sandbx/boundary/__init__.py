"""The boundary: the ONLY code in sandbx that creates processes.

It turns a ``Policy`` into kernel state (namespaces, capabilities, Landlock,
seccomp) on a forked process tree and reports how the run ended. It never
decides what is granted; it enforces what ``sandbx.policy`` derived, or
refuses the run.
"""

from sandbx.boundary._outcome import Exited, Failed, FailureReason, Outcome, RunResult
from sandbx.boundary._spawn import Capture, run_sandboxed
from sandbx.boundary._stderr_guard import StderrGuard

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sandbx.boundary._probe import HostReport, Probe, probe_host
    from sandbx.boundary._spawner import Spawner
    from sandbx.boundary._worker import FileWorker, WorkerUnavailable

__all__ = [
    "Capture",
    "Exited",
    "Failed",
    "FailureReason",
    "FileWorker",
    "HostReport",
    "Outcome",
    "Probe",
    "RunResult",
    "Spawner",
    "StderrGuard",
    "WorkerUnavailable",
    "probe_host",
    "run_sandboxed",
]


_LAZY = {
    "HostReport": "sandbx.boundary._probe",
    "Probe": "sandbx.boundary._probe",
    "probe_host": "sandbx.boundary._probe",
    "Spawner": "sandbx.boundary._spawner",
    "FileWorker": "sandbx.boundary._worker",
    "WorkerUnavailable": "sandbx.boundary._worker",
}


def __getattr__(name: str) -> object:
    # The host probes serve `sandbx doctor`, the spawner and the worker serve the
    # agent: sandbox-run does not pay for importing them.
    if name in _LAZY:
        import importlib  # noqa: PLC0415

        return getattr(importlib.import_module(_LAZY[name]), name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
