"""A small Chrome DevTools Protocol client over --remote-debugging-pipe (test support, stdlib only).

Chromium reads commands from fd 3 and writes replies and events to fd 4, each a JSON message ended by a NUL.
`Browser` starts a headless Chromium with a fresh profile, attaches to its page (a flat session) and records
every event, so a test can ask afterwards what the page logged, threw or requested.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 20.0
# a quiet, offline browser: no first-run UI, no background fetches of its own (updates, sync, safe browsing)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars")


def find_chromium() -> str | None:
    """The Chromium executable: $CHROMIUM, else the first of CHROMIUM_NAMES on PATH."""
    return os.environ.get("CHROMIUM") or next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


class CDPError(RuntimeError):
    pass


class Browser:
    """`with Browser(profile_dir) as b:` a headless Chromium page; b.send(method, **params) -> result."""

    def __init__(self, profile_dir: Path, *, width: int = 1400, height: int = 1000, executable: str | None = None):
        exe = executable or find_chromium()
        if exe is None:
            raise CDPError("no chromium on PATH")
        to_child, self._out = os.pipe()  # we write commands, Chromium reads them on fd 3
        self._in, from_child = os.pipe()  # Chromium writes on fd 4, we read

        def fds():  # in the child, before exec: the pipe ends become fds 3 and 4, the rest close at exec
            a, b = os.dup(to_child), os.dup(from_child)  # copies above 2, so neither dup2 below closes the other
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile_dir}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, close_fds=False)  # close_fds would close 3 and 4; every other fd is close-on-exec
        os.close(to_child)
        os.close(from_child)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        self.session = None
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True,
                                 session=False)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("Browser.close", session=False)
                self.proc.wait(5)
            except (CDPError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(5)
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass

    def send(self, method: str, *, session: bool = True, **params) -> dict:
        """Send a command, read (and record events) until its reply; its result, or CDPError."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_event(self, method: str, timeout: float = TIMEOUT_S) -> dict:
        """The first recorded event `method` (waiting for it up to `timeout` s)."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e["method"] == method:
                    return e
            self._read(deadline)

    def _read(self, deadline: float | None = None) -> dict:
        deadline = deadline or time.monotonic() + TIMEOUT_S
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise CDPError(f"no reply from chromium in {TIMEOUT_S:.0f} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise CDPError("chromium closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg = json.loads(raw)
        if "method" in msg:
            self.events.append(msg)
        return msg

    # conveniences for tests
    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (by value); CDPError if it throws."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise CDPError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def mouse(self, kind: str, x: float, y: float, **extra) -> None:
        """A real input event: kind mouseMoved, mousePressed, mouseReleased, mouseWheel."""
        self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def click(self, x: float, y: float) -> None:
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png",
                                                    captureBeyondViewport=True)["data"]))
        return path
