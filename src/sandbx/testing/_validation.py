"""The checks the Messages API makes before it answers, so a client's malformed request
fails here as it would against the real service, with a message naming the problem.

Stricter than the real API in one way, on purpose: roles must alternate, where the API
would merge two turns of one role, since a harness that sends them has lost track.
It checks the request's shape only; it never looks at the script.
"""

from __future__ import annotations

TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")


class RequestInvalid(ValueError):
    """A request the API would answer with 400 ``invalid_request_error``."""


def check_request(body: object) -> dict[str, object]:
    """``body``, a parsed JSON body, if valid; else ``RequestInvalid`` naming its first problem."""
    if not isinstance(body, dict):
        raise RequestInvalid("the request body is not a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestInvalid("model: Field required (a model name)")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise RequestInvalid("max_tokens: Field required (a whole number of one or more)")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise RequestInvalid("stream: Input should be a valid boolean")
    _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"))
    _check_messages(body.get("messages"))
    return body


def _check_tools(tools: object) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise RequestInvalid("tools: Input should be a valid list")
    names: set[str] = set()
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise RequestInvalid(f"tools.{index}: Input should be an object")
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise RequestInvalid(f"tools.{index}.name: Field required")
        # Server tools ({"type": "web_search_20250305", ...}) carry no schema of ours.
        is_custom = tool.get("type", "custom") == "custom"
        if is_custom and not isinstance(tool.get("input_schema"), dict):
            raise RequestInvalid(f"tools.{index}.input_schema: Field required")
        if name in names:
            raise RequestInvalid(f"tools: Tool names must be unique; {name!r} repeats")
        names.add(name)


def _check_tool_choice(tool_choice: object) -> None:
    if tool_choice is None:
        return
    if not isinstance(tool_choice, dict) or tool_choice.get("type") not in TOOL_CHOICE_TYPES:
        allowed = ", ".join(repr(choice) for choice in TOOL_CHOICE_TYPES)
        raise RequestInvalid(f"tool_choice.type: Input should be one of {allowed}")
    if tool_choice["type"] == "tool" and not isinstance(tool_choice.get("name"), str):
        raise RequestInvalid("tool_choice.name: Field required when tool_choice.type is 'tool'")


def _check_messages(messages: object) -> None:
    if not isinstance(messages, list) or not messages:
        raise RequestInvalid("messages: at least one message is required")
    expected_role = "user"
    unanswered: list[str] = []
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            raise RequestInvalid(f"{where}: Input should be an object")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise RequestInvalid(f"{where}.role: Input should be 'user' or 'assistant'")
        if role != expected_role:
            if index == 0:
                raise RequestInvalid('messages: the first message must use the "user" role')
            raise RequestInvalid(
                f'{where}: roles must alternate between "user" and "assistant", '
                f'but {where} is a second "{role}" message in a row'
            )
        is_prefill = role == "assistant" and index == len(messages) - 1
        blocks = _content_blocks(message.get("content"), where, may_be_empty=is_prefill)
        if role == "user":
            _check_answers(blocks, unanswered, where)
            unanswered = []
            expected_role = "assistant"
        else:
            unanswered = _check_assistant_blocks(blocks, where)
            expected_role = "user"


def _content_blocks(
    content: object, where: str, *, may_be_empty: bool
) -> list[tuple[int, dict[str, object]]]:
    """The blocks of a message's content, each with its position; a string is one text."""
    # Only the final assistant message (a prefill) may be empty.
    if isinstance(content, str):
        if not content and not may_be_empty:
            raise RequestInvalid(f"{where}: all messages must have non-empty content")
        return [(0, {"type": "text", "text": content})]
    if not isinstance(content, list):
        raise RequestInvalid(f"{where}.content: Input should be a string or a list of blocks")
    if not content and not may_be_empty:
        raise RequestInvalid(f"{where}: all messages must have non-empty content")
    blocks: list[tuple[int, dict[str, object]]] = []
    for position, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise RequestInvalid(f"{where}.content.{position}.type: Field required")
        blocks.append((position, block))
    return blocks


def _check_answers(
    blocks: list[tuple[int, dict[str, object]]], unanswered: list[str], where: str
) -> None:
    """A user message answers exactly the tool_use ids of the assistant message before it."""
    answered: list[str] = []
    seen_other_block = False
    for position, block in blocks:
        block_where = f"{where}.content.{position}"
        match block["type"]:
            case "tool_result":
                tool_use_id = block.get("tool_use_id")
                if not isinstance(tool_use_id, str):
                    raise RequestInvalid(f"{block_where}.tool_use_id: Field required")
                if tool_use_id not in unanswered:
                    raise RequestInvalid(
                        f"{block_where}: unexpected `tool_use_id` found in `tool_result` "
                        f"blocks: {tool_use_id}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                if seen_other_block:
                    raise RequestInvalid(
                        f"{block_where}: `tool_result` blocks must come first in the "
                        "content, before any other block"
                    )
                answered.append(tool_use_id)
            case "tool_use" | "thinking" | "redacted_thinking":
                raise RequestInvalid(f"{block_where}: a {block['type']} block is the assistant's")
            case _:
                seen_other_block = True
    missing = [tool_use_id for tool_use_id in unanswered if tool_use_id not in answered]
    if missing:
        raise RequestInvalid(
            f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."
        )


def _check_assistant_blocks(blocks: list[tuple[int, dict[str, object]]], where: str) -> list[str]:
    """The tool_use ids the next user message must answer."""
    tool_use_ids: list[str] = []
    for position, block in blocks:
        block_where = f"{where}.content.{position}"
        match block["type"]:
            case "tool_use":
                tool_use_ids.append(_tool_use_id(block, block_where, tool_use_ids))
            case "thinking":
                signature = block.get("signature")
                if not isinstance(signature, str) or not signature:
                    raise RequestInvalid(f"{block_where}.thinking.signature: Field required")
            case "tool_result":
                raise RequestInvalid(f"{block_where}: a tool_result block is the user's")
            case _:
                pass
    return tool_use_ids


def _tool_use_id(block: dict[str, object], where: str, earlier: list[str]) -> str:
    tool_use_id = block.get("id")
    if not isinstance(tool_use_id, str) or not tool_use_id:
        raise RequestInvalid(f"{where}.id: Field required")
    if tool_use_id in earlier:
        raise RequestInvalid(f"{where}: `tool_use` ids must be unique; {tool_use_id} repeats")
    for field in ("name", "input"):
        if field not in block:
            raise RequestInvalid(f"{where}.{field}: Field required")
    return tool_use_id
