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

__all__ = [
    "Capture",
    "Exited",
    "Failed",
    "FailureReason",
    "HostReport",
    "Outcome",
    "Probe",
    "RunResult",
    "StderrGuard",
    "probe_host",
    "run_sandboxed",
]


def __getattr__(name: str) -> object:
    # The host probes serve `sandbx doctor` only; sandbox-run does not pay for them.
    if name in ("HostReport", "Probe", "probe_host"):
        from sandbx.boundary import _probe  # noqa: PLC0415

        return getattr(_probe, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
