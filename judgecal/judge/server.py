"""Start and stop a local OpenAI-compatible judge server: ``transformers serve`` with a model
folder, on 127.0.0.1 and a free port. Used by ``judgecal rate --serve`` and the tests.

The server's output goes to a log file (an unread pipe fills up and blocks the server); the
process is terminated (then killed) on exit, whatever happened inside the ``with`` block."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from judgecal.errors import EndpointError, ModelError


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def transformers_cli() -> str:
    """Path of the ``transformers`` command beside this Python, else on PATH (ModelError if none)."""
    beside = Path(sys.executable).parent / "transformers"
    if beside.is_file():
        return str(beside)
    found = shutil.which("transformers")
    if not found:
        raise ModelError("`transformers serve` is not installed: pip install 'judgecal[local]'")
    return found


class LocalServer:
    """``with LocalServer(folder) as base_url:`` -> ``http://127.0.0.1:PORT/v1``.

    ``device``: cpu or cuda; ``dtype``: float32, bfloat16...; ``startup_s``: seconds to wait
    for ``/health``. Raises EndpointError (with the log's tail) when the server dies or does not
    answer in time."""

    def __init__(self, folder: str | Path, *, device: str = "cpu", dtype: str = "float32", port: int | None = None,
                 startup_s: float = 240.0, log_path: str | Path | None = None):
        self.folder = Path(folder)
        if not (self.folder / "config.json").is_file():
            raise ModelError(f"model folder {self.folder} has no config.json (run `judgecal model pull`)")
        self.device, self.dtype, self.port, self.startup_s = device, dtype, port or free_port(), startup_s
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="judgecal-serve-", suffix=".log")[1])
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-1500:].strip().replace("\n", " | ")
        except OSError:
            return ""

    def __enter__(self) -> str:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        log = open(self.log_path, "w")
        cmd = [transformers_cli(), "serve", str(self.folder), "--device", self.device, "--dtype", self.dtype,
               "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EndpointError(f"transformers serve exited with status {self.proc.returncode}: {self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return self.base_url
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise EndpointError(f"transformers serve did not answer /health within {self.startup_s:.0f} s: {self._tail()}")

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 20 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __exit__(self, *exc) -> None:
        self.stop()
