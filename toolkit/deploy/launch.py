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

from pydantic import ValidationError

from toolkit.deploy.batcher import MAX_BATCH_DOCS
from toolkit.deploy.settings import ServeSettings
from toolkit.errors import ToolkitError
from toolkit.rundir import MANIFEST


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, so a service started here never collides with a running one."""
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def service_env(artifact: Path, max_batch_size: int = MAX_BATCH_DOCS, **limits: int | float | str) -> dict[str, str]:
    """The environment the service module reads its settings from (`ServeSettings.to_env`, checked here)."""
    # A cheap check here, so a wrong path fails with its fix rather than inside a worker;
    # the service verifies every file's sha256 when it loads the artifact.
    if not (Path(artifact) / MANIFEST).is_file():
        raise ToolkitError(f"{artifact}: no {MANIFEST}", fix="pass a directory made by `toolkit export`")
    try:
        settings = ServeSettings(artifact=artifact, max_batch_size=max_batch_size, **limits)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise ToolkitError(
            f"serve setting {where}: {first['msg']}", fix=f"see `toolkit serve --help` for {where}"
        ) from None
    return {**os.environ, **settings.to_env()}


# Seconds uvicorn gives requests in flight once asked to stop; what is left is then cut off. Together
# with the arbiter stopping its worker, the service is gone within STOP_GRACE.
GRACEFUL_SHUTDOWN_S = 2
STOP_GRACE_S = 5.0


SERVICE = "toolkit.deploy.serving:Extraction"


def serve_command(host: str, port: int, target: str = SERVICE) -> list[str]:
    """`bentoml serve` of the service module, or of a built bento (`target` its tag)."""
    return [
        sys.executable,
        "-m",
        "bentoml",
        "serve",
        target,
        "--host",
        host,
        "--port",
        str(port),
        "--timeout-graceful-shutdown",
        str(GRACEFUL_SHUTDOWN_S),
    ]


def stop_process_tree(process: subprocess.Popen, grace: float = STOP_GRACE_S) -> float:
    """Stop `bentoml serve` and everything it started; returns the seconds it took.

    SIGTERM goes to the arbiter alone, which stops its workers in order (signalling every process at
    once raced the arbiter's own stop and respawn); whatever is still running after `grace` seconds, the
    arbiter included, gets SIGKILL. The descendants are listed first, because BentoML's workers can
    outlive their parent (they were left holding the port when only the arbiter was waited for)."""
    import psutil

    started, family = time.monotonic(), []
    try:
        root = psutil.Process(process.pid)
        family = [root, *root.children(recursive=True)]
        root.terminate()
    except psutil.NoSuchProcess:
        pass  # already gone; any descendants listed are still stopped below
    _, alive = psutil.wait_procs(family, timeout=grace)
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
    return time.monotonic() - started


def serve_artifact(artifact: Path, host: str, port: int, max_batch_size: int, **limits: int | float | str) -> None:
    """Serve in the foreground until interrupted; SIGTERM or SIGINT stops the whole process tree within seconds."""
    import signal

    env = service_env(artifact, max_batch_size, **limits)
    child = subprocess.Popen(serve_command(host, port), env=env, start_new_session=True)
    # The handlers only record the signal: stopping from inside a handler that interrupted
    # `child.wait()` left that wait holding the child's lock, so the stop's own wait spent its whole
    # timeout on it (5 s). The loop below polls, and stops the tree from the main flow.
    received: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    while child.poll() is None and not received:
        time.sleep(0.1)
    stop_process_tree(child)  # also collects workers left behind by an arbiter that died
    raise SystemExit(128 + received[0] if received else child.returncode)


def start_toolkit_serve(artifact: Path, port: int, startup_timeout: float = 180.0) -> subprocess.Popen:
    """`toolkit serve ARTIFACT --port PORT` as a user runs it, returned once it answers /readyz (for the
    tests and the benchmark of how it stops)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "serve", str(artifact), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:  # refused, reset, or timed out: probe again
            time.sleep(0.3)
    stop_process_tree(proc)
    raise ToolkitError(
        f"toolkit serve {artifact} did not become ready within {startup_timeout:.0f} s",
        fix="run it by hand and read its output",
    )


class Server:
    """The service in a child process, for the demo, tests and benchmarks: `with Server(dir) as s: s.post(...)`."""

    def __init__(
        self,
        artifact: Path,
        port: int = 3000,
        host: str = "127.0.0.1",
        max_batch_size: int = MAX_BATCH_DOCS,
        startup_timeout: float = 180.0,
        log: Path | None = None,
        bento: str | None = None,
        **limits: int | float | str,
    ):
        self.url = f"http://{host}:{port}"
        self.env = service_env(artifact, max_batch_size, **limits)
        if bento:  # the bento's own copy of the artifact, and its own settings, are what is served
            self.env = {k: v for k, v in self.env.items() if k not in ("TOOLKIT_ARTIFACT", "TOOLKIT_MAX_BATCH_SIZE")}
        self.command = serve_command(host, port, bento or SERVICE)
        self.startup_timeout = startup_timeout
        self.log_path = log
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        # A new session, so stopping it also stops BentoML's worker processes.
        self.process = subprocess.Popen(
            self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
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
        raise ToolkitError(
            f"the service did not become ready within {self.startup_timeout:.0f} s",
            fix="read its log, or raise startup_timeout",
        )

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            stop_process_tree(self.process)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 120
    ) -> tuple[int, bytes]:
        req = urllib.request.Request(
            self.url + path, data=body, method=method, headers={"Content-Type": "application/json", **(headers or {})}
        )
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
