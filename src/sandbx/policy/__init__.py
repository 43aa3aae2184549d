"""Policy: grants, vetting, the default policy and its refusals. Pure data; no processes.

A policy is derived once from flags and the host, and never widened after.
"""

from sandbx.policy._derive import SYSTEM_FLOOR, GrantFlags, derive_policy, vet_timeout
from sandbx.policy._derived_root import vet_derived_root
from sandbx.policy._environment import DEFAULT_ENV_NAMES, vet_env_name
from sandbx.policy._model import (
    Access,
    Command,
    GrantOrigin,
    Network,
    NetworkKind,
    Pin,
    Policy,
    ResolverFiles,
    VettedGrant,
)
from sandbx.policy._network import is_port_text
from sandbx.policy._owned import credential_file, owned_paths, session_store_dir
from sandbx.policy._paths import is_within
from sandbx.policy._pin import parse_digest, sha256_of_fd, starts_with_shebang

__all__ = [
    "DEFAULT_ENV_NAMES",
    "SYSTEM_FLOOR",
    "Access",
    "Command",
    "GrantFlags",
    "GrantOrigin",
    "Network",
    "NetworkKind",
    "Pin",
    "Policy",
    "ResolverFiles",
    "VettedGrant",
    "credential_file",
    "derive_policy",
    "is_port_text",
    "is_within",
    "owned_paths",
    "parse_digest",
    "session_store_dir",
    "sha256_of_fd",
    "starts_with_shebang",
    "vet_derived_root",
    "vet_env_name",
    "vet_timeout",
]
