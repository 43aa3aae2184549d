"""The key store: where the Anthropic API key comes from, and the file ``auth login`` writes."""

from sandbx.credentials._store import (
    CredentialFileRefused,
    FoundKey,
    KeySource,
    credential_path,
    find_key,
    remove_key,
    store_key,
)

__all__ = [
    "CredentialFileRefused",
    "FoundKey",
    "KeySource",
    "credential_path",
    "find_key",
    "remove_key",
    "store_key",
]
