"""Load a page in headless chromium over the DevTools protocol and report what happened.

A small WebSocket client (RFC 6455, standard library only) drives one
chromium process: it opens the page, collects every console error, uncaught
exception and browser log error (a failed resource load, a refused
``data:`` URL...), checks each image after decoding, and takes a full-page
screenshot. Used by tests/report and runnable by hand::

    python tests/report/browser_cdp.py out/report.html docs/figures/report.png
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
"""Executables tried, in order."""

IMAGES_JS = """
Promise.all(Array.from(document.images).map(img =>
  img.decode().then(() => true, () => false).then(decoded => ({
    alt: img.alt, decoded: decoded, complete: img.complete,
    width: img.naturalWidth, height: img.naturalHeight }))))
"""
"""Every image of the page after it was decoded (or failed to)."""


def find_browser() -> str | None:
    """Path of a chromium executable, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class WebSocket:
    """A client WebSocket: text frames out (masked), whole messages in."""

    def __init__(self, url: str, timeout_s: float = 120.0) -> None:
        parsed = urlparse(url)
        self.sock = socket.create_connection((parsed.hostname, parsed.port), timeout=timeout_s)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {parsed.path} HTTP/1.1\r\nHost: {parsed.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the WebSocket: {head[:200]!r}")

    def send(self, text: str) -> None:
        """One masked text frame."""
        payload = text.encode()
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _exact(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            data += chunk
        return bytes(data)

    def receive(self) -> str:
        """The next whole text message (continuation frames joined, pings answered)."""
        message = bytearray()
        while True:
            first, second = self._exact(2)
            n = second & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._exact(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._exact(8))
            payload = self._exact(n)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode == 0x9:
                self.sock.sendall(struct.pack("!BB", 0x8A, 0x80) + os.urandom(4))
                continue
            message += payload
            if first & 0x80:
                return message.decode()

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


@dataclass
class PageReport:
    """What loading a page showed."""

    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and browser log errors, one line each."""
    images: list[dict[str, Any]] = field(default_factory=list)
    """Per image: alt, decoded, complete, width, height (natural size, px)."""
    screenshot_png: bytes = b""
    """Full-page screenshot."""


class Session:
    """One DevTools session on one page target, over the browser's WebSocket."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws, self.next_id = ws, 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, False
        )
        self.session_id = attached["sessionId"]

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> Any:
        """Send a command and wait for its answer, keeping the events that come before it."""
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session_id
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.receive())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout_s: float) -> None:
        """Keep events until one called ``method`` arrives."""
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout_s} s")
            self.events.append(json.loads(self.ws.receive()))


def event_errors(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, exceptions and log errors among DevTools events."""
    errors = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            errors.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            errors.append(f"exception: {text}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            errors.append(
                f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}"
            )
    return errors


def inspect_page(session: Session, url: str, width: int, timeout_s: float) -> PageReport:
    """Open ``url``; collect errors and images; take a full-page screenshot."""
    for domain in ("Runtime", "Log", "Page"):
        session.call(f"{domain}.enable")
    session.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    session.call("Page.navigate", {"url": url})
    session.wait_for("Page.loadEventFired", timeout_s)
    images = session.call(
        "Runtime.evaluate", {"expression": IMAGES_JS, "awaitPromise": True, "returnByValue": True}
    )["result"]["value"]
    size = session.call("Page.getLayoutMetrics")["cssContentSize"]
    shot = session.call(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1},
        },
    )
    return PageReport(event_errors(session.events), images, base64.b64decode(shot["data"]))


def load_page(page: Path, width: int = 1200, timeout_s: float = 120.0) -> PageReport:
    """Start headless chromium, inspect ``page`` (a local file), stop chromium."""
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError(
            "chromium not found: run scripts/ensure-chromium.sh (apt-get install chromium)"
        )
    # Chromium's helper processes may still write to the profile for a moment after
    # the browser exits; the whole process group is stopped, and what is left of
    # the profile is removed without failing the test.
    with tempfile.TemporaryDirectory(
        prefix="arkgpu-chromium-", ignore_cleanup_errors=True
    ) as profile:
        args = [
            browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
            "--disable-breakpad", "--disable-crash-reporter",
            "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank",
        ]  # fmt: skip
        log = Path(profile) / "stderr.log"
        with log.open("w") as err:
            proc = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
            )
        try:
            ws = WebSocket(_devtools_url(proc, log, timeout_s), timeout_s)
            try:
                return inspect_page(Session(ws), page.resolve().as_uri(), width, timeout_s)
            finally:
                ws.close()
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM chromium's process group, SIGKILL it after 10 s, and reap the browser."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 30.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        _wait_group_gone(proc.pid, wait_s)
        return


def _wait_group_gone(pgid: int, wait_s: float) -> None:
    """Wait until no process of group ``pgid`` is left (helpers exit after the browser)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _devtools_url(proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> str:
    """The browser's WebSocket URL, from the line chromium writes to standard error."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        found = re.search(r"DevTools listening on (ws://\S+)", text)
        if found:
            return found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"chromium did not start its DevTools server; it wrote:\n{tail}")


def main(argv: list[str]) -> int:
    """``browser_cdp.py PAGE [SCREENSHOT]``: print errors and images; save the screenshot."""
    report = load_page(Path(argv[0]))
    for error in report.errors:
        print(f"error: {error}")
    for image in report.images:
        print(
            f"image {image['width']}x{image['height']} decoded={image['decoded']}: {image['alt']}"
        )
    if len(argv) > 1:
        Path(argv[1]).write_bytes(report.screenshot_png)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
