"""Reaching an OpenAI-compatible server: the default address, the placeholder key, the headers
that keep the settings the only source of credentials, and whether the settings name a model.
"""

from __future__ import annotations

from openai import Omit, omit

from memstream.models.settings import Settings

#: Used when no base URL is configured, passed explicitly so the client never falls back to
#: the ``OPENAI_BASE_URL`` environment variable (settings are the only source of config).
OPENAI_BASE_URL = "https://api.openai.com/v1"
#: Sent when no API key is configured: local servers ignore it, and the client refuses to
#: start without one (vLLM's documentation uses the same placeholder).
PLACEHOLDER_API_KEY = "EMPTY"


def request_headers(api_key: str) -> dict[str, str | Omit]:
    """Headers to send with every request so the settings stay the only source of
    credentials: the ``openai`` client also reads ``OPENAI_CUSTOM_HEADERS``,
    ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID`` (an Authorization line in the first replaces
    the key it was given), and per-request headers win over all of them."""
    return {
        "Authorization": f"Bearer {api_key or PLACEHOLDER_API_KEY}",
        "OpenAI-Organization": omit,
        "OpenAI-Project": omit,
    }


def model_configured(settings: Settings) -> bool:
    """Whether the settings name a model endpoint: a base URL, or a key for OpenAI's."""
    return bool(settings.llm_base_url or settings.llm_api_key.get_secret_value())
