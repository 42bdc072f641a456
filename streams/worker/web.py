"""The worker's web pages, and who may read them.

=============  =======================================================  ================
page           returns                                                  needs
=============  =======================================================  ================
``/health/``   ``{"ok": true, "app": id}``: the process answers         nothing
``/ready/``    each component's state; 200 only if all are running      nothing (the
                                                                        exception texts
                                                                        need the token,
                                                                        if one is set)
``/sessions/`` one user's open sessions (``?user=U``)                   the token
``/session/``  one session's state and working-memory context           the token
               (``?user=U&session=S[&budget=N]``)
``/metrics``   this worker's Prometheus metrics                         the token
               (:mod:`memstream.streams.observability.metrics`)
=============  =======================================================  ================

The pages that return a user's data are answered by the worker that owns the user's
partition of the chat topic: any other worker forwards the request there
(``app.topic_route``). Faust forwards the request's headers (``Router._route_req`` passes
``request.headers`` to its HTTP client), so the owner sees the caller's ``Authorization``
header and checks the token again; a worker refuses a bad token before it forwards anything.

With ``MEMSTREAM_WEB_TOKEN`` unset, the pages are open to whoever can reach the port, so the
worker then listens on a loopback address only (:func:`check_web_exposure`). Faust's own
table, router, graph and statistics pages are turned off (:func:`faust_web_settings`): the
table pages would serve the sessions table by key.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any, cast

import faust
from aiohttp import web as aiohttp_web
from faust.web import Request, Response, View
from multidict import MultiMapping

from memstream.models.session import ClosedSession, SessionState, session_key, working_context
from memstream.models.settings import Settings, weak_token_problem
from memstream.streams.agents.session_table import SessionStore
from memstream.streams.observability.metrics import exposition
from memstream.streams.worker.health import Components

Handler = Callable[[View, Request], Awaitable[Response]]


class UnsafeWebExposure(ValueError):
    """The worker would serve its pages to others without a token (or with a weak one)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback address (``localhost``, ``127.0.0.0/8``, ``::1``).

    Examples
    --------
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name, or "" (every interface): not known to be loopback


def check_web_exposure(settings: Settings) -> None:
    """Refuse to serve the pages beyond this machine without a token, or with a weak one.

    Raises
    ------
    UnsafeWebExposure
        ``web_host`` is not a loopback address and ``web_token`` is not set, or the token
        is shorter than :data:`~memstream.models.settings.MIN_TOKEN_CHARS` or holds anything but printable ASCII
        (an HTTP header must carry it unchanged). The message never contains the token.
    """
    token = settings.web_token
    if token is None:
        if not is_loopback(settings.web_host):
            raise UnsafeWebExposure(
                f"MEMSTREAM_WEB_HOST={settings.web_host!r} is not a loopback address and "
                "MEMSTREAM_WEB_TOKEN is not set: anyone who reaches the web port could read "
                "every user's sessions. Set MEMSTREAM_WEB_TOKEN (and send it as "
                "'Authorization: Bearer <token>'), or listen on MEMSTREAM_WEB_HOST=127.0.0.1."
            )
        return
    problem = weak_token_problem("MEMSTREAM_WEB_TOKEN", token)
    if problem is not None:
        raise UnsafeWebExposure(problem)


def faust_web_settings(settings: Settings) -> dict[str, Any]:
    """The Faust app settings of the worker's web server (for ``faust.App(...)``)."""
    return {
        "web_host": settings.web_host,
        "web_port": settings.web_port,
        # Routed session reads go worker to worker by this address.
        "canonical_url": f"http://{settings.web_host}:{settings.web_port}",
        "web_in_thread": False,
        # Faust's own pages are not guarded by the token: /table/ serves table values by
        # key and /router/ the cluster's addresses. Routing does not need them (the router
        # asks the partition assignor in-process), so they are off, as are the debug pages.
        "web_tables_enabled": False,
        "web_router_enabled": False,
        "web_graph_enabled": False,
        "web_stats_enabled": False,
        "web_metrics_enabled": False,
    }


def bearer_token_matches(request: Request, settings: Settings) -> bool:
    """Whether ``request`` carries exactly one ``Authorization: Bearer <web_token>`` header
    (always true when no token is set). The token is compared in constant time."""
    token = settings.web_token
    if token is None:
        return True
    headers = cast(aiohttp_web.Request, request).headers
    given = headers.getall("Authorization", [])
    if len(given) != 1:
        return False
    scheme, _, credentials = given[0].partition(" ")
    # aiohttp decodes header bytes as UTF-8 with surrogateescape: this gives the bytes back.
    sent = credentials.encode("utf-8", "surrogateescape")
    expected = token.get_secret_value().encode("ascii")
    # compare_digest: the time taken does not tell how much of a guess was right.
    return hmac.compare_digest(sent, expected) and scheme.lower() == "bearer"


def query(request: Request) -> MultiMapping[str]:
    """The request's query parameters (Faust's request is aiohttp's)."""
    return cast(aiohttp_web.Request, request).query


def guarded(settings: Settings, *, params: tuple[str, ...] = ()) -> Callable[[Handler], Handler]:
    """Decorate a page that returns data: 401 without the token, 400 unless each of
    ``params`` is given exactly once and not empty. Put it outside ``app.topic_route``, so
    a worker checks a request before it forwards it (the owner checks it again)."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def checked(view: View, request: Request) -> Response:
            if not bearer_token_matches(request, settings):
                return view.error(
                    401,
                    "send the worker's token as 'Authorization: Bearer <token>'",
                    headers={"WWW-Authenticate": 'Bearer realm="memstream"'},
                )
            given = query(request)
            for name in params:
                values = given.getall(name, [])
                if len(values) != 1 or not values[0]:
                    return view.error(400, f"give {name} exactly once")
            return await handler(view, request)

        return checked

    return decorate


def register_pages(
    app: faust.App,
    store: SessionStore,
    settings: Settings,
    chat_topic: Any,
    health: Components,
) -> None:
    """Add the worker's pages (see the module docstring) to ``app``.

    ``chat_topic`` is the topic whose partitions say which worker owns a user; ``health``
    the registry ``/ready/`` reports.

    Raises
    ------
    UnsafeWebExposure
        See :func:`check_web_exposure`.
    """
    check_web_exposure(settings)
    served_by = f"http://{settings.web_host}:{settings.web_port}"

    @app.page("/health/")
    async def liveness(view: View, request: Request) -> Response:
        """The process answers; says nothing of its agents (see /ready/)."""
        return view.json({"ok": True, "app": app.conf.id})

    @app.page("/ready/")
    async def readiness(view: View, request: Request) -> Response:
        """200 when every agent and task of this worker runs, 503 otherwise; each
        component's state. Exception texts only with the token (they may quote data), or
        to anyone when no token is set (every page is open then, on loopback only)."""
        snapshot = health.snapshot()
        with_detail = bearer_token_matches(request, settings)
        body = {"app": app.conf.id, **snapshot.as_json(with_detail=with_detail)}
        return view.json(body, status=200 if snapshot.ready else 503)

    @app.page("/metrics")
    @guarded(settings)
    async def metrics(view: View, request: Request) -> Response:
        """This worker's metrics in Prometheus' text format (the consumer lag read now)."""
        body, content_type = exposition()
        # aiohttp's own Response: Faust's text() refuses a content type with parameters.
        return cast(Response, aiohttp_web.Response(body=body, headers={"Content-Type": content_type}))

    @app.page("/sessions/")
    @guarded(settings, params=("user",))
    @app.topic_route(topic=chat_topic, query_param="user")
    async def user_sessions(view: View, request: Request) -> Response:
        """One user's open sessions, from the worker that owns the user's partition."""
        user = query(request)["user"]
        # The prefix spares parsing (and opening) other users' sessions; the state's own
        # user id still decides, should an id ever hold the key's separator.
        prefix = session_key(user, "")
        found = []
        for key in store.session_keys():
            if not key.startswith(prefix):
                continue
            value = store.get(key)
            if isinstance(value, SessionState) and value.user_id == user:
                found.append(value.model_dump(mode="json"))
        return view.json({"sessions": found, "served_by": served_by})

    @app.page("/session/")
    @guarded(settings, params=("user", "session"))
    @app.topic_route(topic=chat_topic, query_param="user")
    async def session_detail(view: View, request: Request) -> Response:
        """One session's state and working-memory context, from the worker that owns the
        user's partition."""
        given = query(request)
        user, session = given["user"], given["session"]
        try:
            budget = int(given.get("budget", settings.context_tokens))
        except ValueError:
            budget = 0
        if budget < 1:
            return view.error(400, "budget must be a whole number of tokens, at least 1")
        value = store.get(session_key(user, session))
        if not isinstance(value, SessionState) or value.user_id != user:
            closed = (
                value.model_dump(mode="json")
                if isinstance(value, ClosedSession) and value.user_id == user
                else None
            )
            return view.json(
                {"error": "no open session", "closed": closed, "served_by": served_by},
                status=404,
            )
        context = working_context(value, token_budget=budget)
        return view.json(
            {
                "state": value.model_dump(mode="json"),
                "context": context.model_dump(mode="json"),
                "prompt": context.render(),
                "served_by": served_by,
            }
        )
