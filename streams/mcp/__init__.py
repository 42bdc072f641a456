"""The MCP server (memstream mcp): memstream's memory as tools for agents (Claude, Cursor,
the OpenAI Agents SDK...), over the application layer, with the HTTP API's keys and tenancy:
server (the tools), results (their answers, cut to fit a context window), http (streamable
HTTP behind API keys, standalone or inside memstream serve)."""

from memstream.streams.mcp.server import TOOLS, create_mcp_server

__all__ = ["TOOLS", "create_mcp_server"]
