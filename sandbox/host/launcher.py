"""Start ``sandbox serve`` as a child process on a free loopback port and wait until it answers.

Used by the benchmarks, the test suite and anything that needs a service of
its own without touching one already running.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

import httpx

SANDBOX_BIN = Path(sys.executable).with_name("sandbox")
DEFAULT_READY_TIMEOUT_S = 120.0


def answers(url: str, timeout: float = 1.0) -> bool:
    """Whether a service at ``url`` answers ``GET /healthz`` with 200."""
    try:
        return httpx.get(url.rstrip("/") + "/healthz", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def free_port() -> int:
    """A TCP port nothing listens on at the moment, on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServiceProcess:
    """One ``sandbox serve`` child; its output goes to :attr:`log_path`."""

    def __init__(
        self,
        *args: str,
        policies: Path | None = None,
        log_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command: Sequence[str] = [str(SANDBOX_BIN), "serve", "--port", str(self.port), *args]
        if policies is not None:
            command = [*command, "--policies", str(policies)]
        directory = log_dir or Path(tempfile.gettempdir())
        self.log_path = directory / f"sandbox-serve-{self.port}.log"
        self._log = self.log_path.open("wb")
        environment = {**os.environ, **(env or {})}
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=environment
        )

    def wait_ready(self, timeout: float = DEFAULT_READY_TIMEOUT_S) -> None:
        """Return once ``/healthz`` answers; raise with the log if it exits or never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited early:\n{self.log()[-4000:]}")
            if answers(self.url):
                return
            time.sleep(0.2)
        raise TimeoutError(f"the service was not ready in {timeout} s:\n{self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> Self:
        """Wait until the service is ready (stopped if it never is); stopped on leaving."""
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
