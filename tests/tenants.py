"""API keys of two tenants, acme and beta, for the unit tests of the interfaces that take
keys (the HTTP API, the MCP server): one key for each tenant's every user, and a read-only
key bound to acme's alice."""

from __future__ import annotations

from memstream.streams.api.auth import ApiKey

ACME_ALL = "msk_acme-all-0123456789abcdef"
ACME_ALICE_READ = "msk_acme-alice-read-0123456789"
BETA_ALL = "msk_beta-all-0123456789abcdef"
KEYS = {
    ACME_ALL: ApiKey("acme"),
    ACME_ALICE_READ: ApiKey("acme", frozenset({"alice"}), read_only=True),
    BETA_ALL: ApiKey("beta"),
}
