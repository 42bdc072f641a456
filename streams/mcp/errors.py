"""Argument errors as one line: the MCP SDK reports a tool's invalid arguments as pydantic's
multi-line text (a heading, the field, the reason with its internals, a link). A caller, or
the model reading the result, needs the field, the reason and what it gave."""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

#: How much of a rejected value the message repeats.
_SHOWN = 60


def one_line(tool: str, error: ValidationError) -> str:
    """``tool``'s argument errors in one line: each field, the reason, the value given.

    Examples
    --------
    >>> from pydantic import BaseModel
    >>> class Arguments(BaseModel):
    ...     limit: int
    >>> try:
    ...     Arguments(limit="many")
    ... except ValidationError as exc:
    ...     print(one_line("search_memories", exc))
    search_memories: limit: Input should be a valid integer, unable to parse string as an integer (got 'many'); see the tool's input schema
    """
    return f"{tool}: {reasons(error)}; see the tool's input schema"


def reasons(error: ValidationError) -> str:
    """Each field of ``error`` with its reason and the value given, on one line."""
    said = []
    for problem in error.errors(include_url=False):
        field = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            said.append(f"{field}: required")
            continue
        given = repr(problem.get("input"))
        given = given if len(given) <= _SHOWN else given[: _SHOWN - 1] + "…"
        reason = " ".join(str(problem["msg"]).split())
        said.append(f"{field}: {reason} (got {given})")
    return "; ".join(said)


class OneLineErrors(MCPServer):
    """The SDK's server, with invalid arguments refused in one line (:func:`one_line`)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(one_line(name, exc.__cause__)) from None
            raise
