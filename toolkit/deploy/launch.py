"""Start and stop the BentoML extraction service (`toolkit serve`, the demo, tests and benchmarks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.rundir import MANIFEST


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, so a service started here never collides with a running one."""
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def service_env(artifact: Path, max_batch_size: int = 32, max_latency_ms: int | None = None, **limits: int | float | str) -> dict[str, str]:
    """The environment the service module reads its settings from (see toolkit.deploy.serving)."""
    # A cheap check here, so a wrong path fails with its fix rather than inside a worker;
    # the model service verifies every file's sha256 when it loads the artifact.
    if not (Path(artifact) / MANIFEST).is_file():
        raise ToolkitError(f"{artifact}: no {MANIFEST}", fix="pass a directory made by `toolkit export`")
    env = {
        **os.environ,
        "TOOLKIT_ARTIFACT": str(Path(artifact).resolve()),
        "TOOLKIT_MAX_BATCH_SIZE": str(max_batch_size),
    }
    if max_latency_ms:
        env["TOOLKIT_MAX_LATENCY_MS"] = str(max_latency_ms)
    env.update({f"TOOLKIT_{k.upper()}": str(v) for k, v in limits.items()})
    return env


def serve_command(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "bentoml", "serve", "toolkit.deploy.serving:Extraction", "--host", host, "--port", str(port)]


def stop_process_tree(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """Stop a process and everything it started: SIGTERM to all, SIGKILL to what outlives `timeout`.

    BentoML's workers are grandchildren that can outlive their parent (they were left holding the
    port when only the group leader was waited for), so every descendant is collected first."""
    import psutil

    try:
        root = psutil.Process(process.pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def serve_artifact(artifact: Path, host: str, port: int, max_batch_size: int, max_latency_ms: int | None, **limits: int | float | str) -> None:
    """Serve in the foreground until interrupted; SIGTERM or SIGINT stops the whole process tree."""
    import signal

    env = service_env(artifact, max_batch_size, max_latency_ms, **limits)
    child = subprocess.Popen(serve_command(host, port), env=env, start_new_session=True)

    def stop(signum, frame):
        stop_process_tree(child)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = child.wait()
    stop_process_tree(child)  # workers left behind by an arbiter that died
    raise SystemExit(code)


class Server:
    """The service in a child process, for the demo, tests and benchmarks: `with Server(dir) as s: s.post(...)`."""

    def __init__(
        self,
        artifact: Path,
        port: int = 3000,
        host: str = "127.0.0.1",
        max_batch_size: int = 32,
        max_latency_ms: int | None = None,
        startup_timeout: float = 180.0,
        log: Path | None = None,
        **limits: int | float | str,
    ):
        self.url = f"http://{host}:{port}"
        self.env = service_env(artifact, max_batch_size, max_latency_ms, **limits)
        self.command = serve_command(host, port)
        self.startup_timeout = startup_timeout
        self.log_path = log
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        # A new session, so stopping it also stops BentoML's worker processes.
        self.process = subprocess.Popen(self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ToolkitError(
                    f"the service exited during start-up (code {self.process.returncode})",
                    fix=f"read its log{': ' + str(self.log_path) if self.log_path else ''}",
                )
            try:
                # A short timeout: a probe sent while the workers start can be accepted and never
                # answered, and with the default 120 s the demo waited that long for nothing.
                if self.get("/readyz", timeout=2)[0] == 200:
                    return self
            except OSError:  # refused, reset, or timed out: probe again
                pass
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise ToolkitError(f"the service did not become ready within {self.startup_timeout:.0f} s", fix="read its log, or raise startup_timeout")

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            # A short grace: nothing is in flight when the demo, a test or a benchmark leaves, and
            # BentoML's API worker did not exit on SIGTERM (or SIGINT) within 35 s even when idle,
            # so the default 30 s was spent waiting every time. `toolkit serve` keeps the full grace.
            stop_process_tree(self.process, timeout=5.0)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 120) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, data=body, method=method, headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def get(self, path: str, **kw) -> tuple[int, bytes]:
        return self.request("GET", path, **kw)

    def post(self, path: str, payload, **kw) -> tuple[int, dict | list | str]:
        """POST JSON (or raw bytes); returns the status and the decoded JSON answer (text when not JSON)."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        status, raw = self.request("POST", path, body, **kw)
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")
