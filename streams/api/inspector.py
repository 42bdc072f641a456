"""The memory inspector: a web page of ``memstream serve`` (``/inspector/``) that shows one
user's memories, their histories, searches with explained scores, and the reports.

The page is static (HTML, CSS and JavaScript modules in ``static/``, shipped in the package,
no build step, nothing fetched from anywhere but this server). It holds no data and needs no
key to load: it asks for an API key and calls ``/v1`` with it like any other client, so a
key sees in the page exactly what it may read over the API. Its answers carry a strict
Content-Security-Policy (scripts, styles and connections from this origin only, images from
it or from blobs the page made): a memory is user content, and the page puts it in as text,
but a policy also stops what a mistake there would let run.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["INSPECTOR_PATH", "PAGE_DIR", "mount_inspector"]

#: Where ``memstream serve`` serves the page.
INSPECTOR_PATH = "/inspector"
#: The page's files, as shipped in the package.
PAGE_DIR = Path(__file__).parent / "static"
#: Headers of every file of the page. ``connect-src 'self'``: the page talks to this server's
#: /v1 only; ``img-src blob:``: a report's chart is fetched with the key and shown as a blob.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new version of the package serves new files: the browser asks again each time.
    "Cache-Control": "no-cache",
}


class _PageFiles(StaticFiles):
    """The page's files, each answered with :data:`PAGE_HEADERS`."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(PAGE_HEADERS)
        return response


def mount_inspector(api: FastAPI) -> None:
    """Serve the memory inspector at ``/inspector/`` of ``api`` (``/inspector`` redirects there).

    Examples
    --------
    >>> api = FastAPI()
    >>> mount_inspector(api)
    >>> [route.path for route in api.routes][-1]
    '/inspector'
    """
    api.mount(INSPECTOR_PATH, _PageFiles(directory=PAGE_DIR, html=True), name="inspector")
