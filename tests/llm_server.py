"""A scripted OpenAI-compatible chat-completions server for tests (stdlib, loopback only)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a status, a JSON (or raw text) body and a delay before it."""

    body: dict[str, Any] | str
    status: int = 200
    delay_s: float = 0.0


@dataclass(frozen=True)
class Received:
    """One request the server got."""

    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]


@dataclass
class ScriptedServer:
    """A chat-completions stand-in: scripted replies in order, every request recorded."""

    replies: list[Reply]
    received: list[Received] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def next_reply(self, request: Received) -> Reply:
        with self.lock:
            self.received.append(request)
            if not self.replies:
                return Reply({"error": {"message": "script exhausted"}}, status=500)
            return self.replies.pop(0)

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = server.next_reply(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                # An Event, not sleep: teardown wakes a slow reply instead of waiting it out.
                if reply.delay_s and server.stopping.wait(reply.delay_s):
                    return
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = payload.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout): nothing to answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll interval keeps shutdown (and so each test's teardown) fast.
        threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    def stop(self) -> None:
        self.stopping.set()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


def completion(
    content: str | None,
    *,
    model: str = "test-model-2026-01-01",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A chat.completion body as OpenAI sends it."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_790_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
