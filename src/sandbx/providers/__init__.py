"""Model adapters: the turn loop sees the ``Provider`` protocol, never an SDK.

``AnthropicProvider`` is imported lazily (the SDK takes a second to load), so
importing this package costs nothing until a model is actually asked.
"""

from sandbx.providers._endpoint import Endpoint, endpoint_from
from sandbx.providers._model import (
    Block,
    Message,
    ModelReply,
    ModelRequest,
    Provider,
    ProviderError,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    Usage,
)

__all__ = [
    "Block",
    "Endpoint",
    "Message",
    "ModelReply",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "Retrying",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "Usage",
    "endpoint_from",
]
