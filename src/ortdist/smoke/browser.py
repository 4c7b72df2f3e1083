"""A page in headless Chromium, served from 127.0.0.1: the web smoke test's browser half.

The server sends the cross-origin isolation headers a threaded WebAssembly module needs
(SharedArrayBuffer) and takes the page's results as one POST to /result. Chromium runs in a root
(its profile written to an overlay, never to the root) and is driven over its DevTools pipe
(``--remote-debugging-pipe``: JSON messages on fds 3 and 4, no websocket library needed): open the
page, wait until its title says it is done, screenshot it.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import json
import os
import select
import shlex
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from .. import run
from ..errors import CheckError
from ..toolchains import Bind, Toolchain

RESULT = "browser-result.json"  # written into the served directory by the page's POST


class _Handler(http.server.SimpleHTTPRequestHandler):
    def guess_type(self, path: str | os.PathLike[str]) -> str:
        """ES modules and WebAssembly with the types browsers insist on."""
        types = {".mjs": "text/javascript", ".wasm": "application/wasm"}
        return types.get(Path(path).suffix) or super().guess_type(path)

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        (Path(self.directory) / RESULT).write_bytes(self.rfile.read(size))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[int]:
    """``directory`` on 127.0.0.1 (a free port, yielded) while the block runs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


class _Pipe:
    """Chromium's DevTools protocol over two pipes, messages separated by NUL bytes."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd, self.read_fd, self.buffer, self.last = write_fd, read_fd, b"", 0

    def call(self, method: str, params: dict[str, Any] | None = None, session: str = "", timeout: float = 60) -> Any:
        self.last += 1
        message: dict[str, Any] = {"id": self.last, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == self.last:
                    if "error" in answer:
                        raise CheckError(f"Chromium refused {method}: {answer['error']}")
                    return answer.get("result", {})
            ready, _, _ = select.select([self.read_fd], [], [], 1)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise CheckError(f"Chromium exited while answering {method}")
                self.buffer += chunk
        raise CheckError(f"Chromium did not answer {method} in {timeout:.0f} s")


def screenshot_page(
    toolchain: Toolchain,
    root: Path,
    binds: Sequence[Bind],
    overlay: Path,
    url: str,
    png: Path,
    done: str,
    log: TextIO,
    timeout: float = 120,
) -> str:
    """Open ``url`` in headless Chromium inside ``root``, wait until the page's title contains
    ``done`` (or ``timeout`` seconds pass), save a screenshot to ``png``; returns the last title."""
    to_child, from_parent = os.pipe()
    from_child, to_parent = os.pipe()
    flags = "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir=/tmp/ortdist-profile"
    inner = (
        f"exec chromium {flags} --window-size=1000,420 --remote-debugging-pipe about:blank 3<&{to_child} 4>&{to_parent}"
    )
    argv = toolchain.wrap(root, ["/bin/sh", "-c", inner], binds=binds, env={"HOME": "/tmp"}, writable=overlay)
    log.write(f"+ {shlex.join(argv)}\n")
    log.flush()
    with run.running(argv, pass_fds=(to_child, to_parent), stdout=log, stderr=log) as proc:
        os.close(to_child)
        os.close(to_parent)
        pipe = _Pipe(from_parent, from_child)
        try:
            target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            pipe.call("Page.enable", session=session)
            pipe.call("Page.navigate", {"url": url}, session=session)
            title, end = "", time.monotonic() + timeout
            while done not in title and time.monotonic() < end:
                time.sleep(0.5)
                title = pipe.call("Runtime.evaluate", {"expression": "document.title"}, session=session)["result"].get(
                    "value", ""
                )
            png.write_bytes(
                base64.b64decode(pipe.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"])
            )
            with contextlib.suppress(CheckError, OSError):
                pipe.call("Browser.close", timeout=10)
        finally:
            os.close(from_parent)
            os.close(from_child)
        proc.wait(timeout=30)
    return str(title)
