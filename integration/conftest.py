"""Fixtures of the real-clients suite: a real `quiver serve` process, and the
pyarrow Flight client that talks to it.

The binary is $QUIVER_BIN when set (scripts/test-python.sh builds it once and
sets it); otherwise it is built here with `go build` into a temp dir, so
`pytest integration/` also works on its own.

Every server listens on 127.0.0.1 only, on a free port, over a fresh temp
data dir. The session server is shared by most tests; each test writes under
its own profile keys (the `keys` fixture), so tests do not see each other's
data. Tests that need a data dir of their own (a pyrosome fixture, tampering)
start a private server with `start_server`.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow.flight as flight
import pytest

from helpers import REPO, SECRET, QuiverServer, launch


# --- the binary ---------------------------------------------------------------


@pytest.fixture(scope="session")
def quiver_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("QUIVER_BIN")
    if env:
        path = Path(env)
        assert path.is_file() and os.access(path, os.X_OK), f"QUIVER_BIN={env} is not an executable"
        return path
    out = tmp_path_factory.mktemp("bin") / "quiver"
    proc = subprocess.run(
        ["go", "build", "-o", str(out), "./cmd/quiver"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"go build ./cmd/quiver failed:\n{proc.stdout}\n{proc.stderr}"
    return out


@pytest.fixture(scope="session")
def start_server(quiver_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """Factory: start_server(data_dir=None) -> QuiverServer on its own data dir.

    Every server started this way is stopped with SIGTERM at the end of the
    session (or earlier with stop_server) and must exit 0.
    """
    started: list[QuiverServer] = []

    def start(data_dir: Path | None = None, extra: list[str] | None = None) -> QuiverServer:
        if data_dir is None:
            data_dir = tmp_path_factory.mktemp(SECRET) / "data"
            data_dir.mkdir()
        logs = tmp_path_factory.mktemp("quiver-log")
        srv = launch(quiver_bin, data_dir, logs / "serve.log", extra)
        started.append(srv)
        return srv

    yield start

    failures = []
    for srv in started:
        rc = srv.stop()
        if rc != 0:
            failures.append(f"quiver serve on port {srv.port} exited {rc} after SIGTERM:\n{srv.log_tail()}")
    assert not failures, "\n\n".join(failures)


@pytest.fixture(scope="session")
def server(start_server) -> QuiverServer:
    """The shared server of the session."""
    return start_server()


@pytest.fixture(scope="session")
def client(server: QuiverServer) -> flight.FlightClient:
    return server.client()


# --- per-test profile names -------------------------------------------------------

_counter = 0


@pytest.fixture
def keys(request: pytest.FixtureRequest) -> str:
    """A profile path unique to this test: "t/<test name>"; more with keys + "/x"."""
    global _counter
    _counter += 1
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", request.node.name).strip("_")[:80]
    return f"t/{name}_{_counter}"


