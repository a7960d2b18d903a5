"""Opening a page in headless Chromium and reading what a person would see.

Debian's ``chromium`` package (``ensure_chromium`` installs it with apt-get when it is missing
and this is root: browser downloads from elsewhere fail here). The browser is driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages separated by NUL bytes
on fds 3 and 4), with the Python standard library alone.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
         "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)


def ensure_chromium() -> str:
    """The Chromium executable; installs Debian's package first when missing (root only)."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0:
        raise RuntimeError("chromium is not installed and this is not root: "
                           "apt-get install chromium")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
    subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q",
                    "--no-install-recommends", "chromium"], check=True, env=env,
                   capture_output=True)
    found = find_chromium()
    if not found:
        raise RuntimeError("apt-get installed chromium but no chromium executable is on PATH")
    return found


class Browser:
    """One headless Chromium; ``open(url)`` returns what the page showed and logged."""

    def __init__(self, executable: str, timeout: float = 60):
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="attention-kit-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser's ends move above 4 first, so that placing them on 3 and 4 below
        # cannot overwrite one with the other.
        to_browser_r, from_browser_w = (_above_four(fd) for fd in (to_browser_r, from_browser_w))
        # The browser reads commands on fd 3 and answers on fd 4.
        launch = (f"exec 3<&{to_browser_r} 4>&{from_browser_w} "
                  f"{to_browser_r}<&- {from_browser_w}>&- && exec \"$0\" \"$@\"")
        self.process = subprocess.Popen(
            ["bash", "-c", launch, executable, *FLAGS,
             f"--user-data-dir={self.profile.name}", "about:blank"],
            pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    # -- the protocol ---------------------------------------------------------------------
    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe: "
                                   + self.process.stderr.read().decode(errors="replace")[-2000:])
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method,
                                   "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    # -- a page ---------------------------------------------------------------------------
    def open(self, url: str, script: str, width: int = 1100) -> dict[str, Any]:
        """Load ``url``; return ``errors`` (console errors, exceptions, failed loads), the value
        of ``script`` evaluated in the page once loaded, and a full-page PNG ``screenshot``."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                  session=session)
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired")
        # The viewport grows to the whole page: every element is then in view, for
        # elementFromPoint in ``script`` and for the screenshot.
        height = self.send("Page.getLayoutMetrics", session=session)["cssContentSize"]["height"]
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": int(height) + 1, "deviceScaleFactor": 1,
                   "mobile": False}, session=session)
        value = self.send("Runtime.evaluate", {"expression": script, "returnByValue": True},
                          session=session)
        if "exceptionDetails" in value:
            raise RuntimeError(f"the check script failed: {value['exceptionDetails']}")
        shot = self.send("Page.captureScreenshot", {"format": "png"}, session=session)
        errors = [_describe(e) for e in self.events if _is_error(e)]
        return {"errors": errors, "value": value["result"].get("value"),
                "screenshot": base64.b64decode(shot["data"])}

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except Exception:  # already gone: nothing to close
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        self.process.stderr.close()
        self.profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _above_four(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def _is_error(event: dict[str, Any]) -> bool:
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        return True
    if method == "Runtime.consoleAPICalled":
        return params.get("type") in ("error", "assert")
    if method == "Log.entryAdded":
        return params.get("entry", {}).get("level") == "error"
    return False


def _describe(event: dict[str, Any]) -> str:
    params = event.get("params", {})
    if event["method"] == "Runtime.consoleAPICalled":
        return "console: " + " ".join(str(a.get("value", a.get("description", "")))
                                      for a in params.get("args", []))
    if event["method"] == "Log.entryAdded":
        entry = params["entry"]
        return f"log: {entry.get('text')} {entry.get('url', '')}".strip()
    details = params.get("exceptionDetails", {})
    thrown = details.get("exception", {}).get("description") or details.get("text", "")
    return f"exception: {thrown} ({details.get('url', '')}:{details.get('lineNumber', '')})"


def save(data: bytes, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
