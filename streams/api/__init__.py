"""The HTTP API (``memstream serve``): the memory service over HTTP, with API keys per tenant.

:mod:`~memstream.streams.api.auth` holds the keys and the tenancy rule,
:mod:`~memstream.streams.api.app` the FastAPI app (``create_api``),
:mod:`~memstream.streams.api.schemas` its request and response bodies. Like the command and
the client, it is a thin adapter over :class:`~memstream.streams.service.app.Service`.
"""
