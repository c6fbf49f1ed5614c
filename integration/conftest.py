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

from helpers import ON_S3, REPO, SECRET, QuiverServer, S3Bucket, S3Server, launch, start_versitygw


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
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A versitygw S3 server for the session (make tools installs it). Where
    it cannot be had the tests that need it are skipped, but not in CI."""
    try:
        srv = start_versitygw(tmp_path_factory.mktemp("versitygw"))
    except Exception as e:  # noqa: BLE001 - any reason it cannot start
        if os.environ.get("CI"):
            pytest.fail(f"versitygw unavailable in CI: {e}")
        pytest.skip(f"versitygw unavailable (CI=true makes this a failure): {e}")
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def start_server(quiver_bin: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator:
    """Factory: start_server(data_dir=None) -> QuiverServer on its own data dir
    (with QUIVER_TEST_STORAGE=s3 and no data_dir: on a new bucket of the
    session's versitygw; start_server(bucket=b): on bucket b. Its data_dir is
    then where versitygw keeps the objects).

    Every server started this way is stopped with SIGTERM at the end of the
    session (or earlier with stop_server) and must exit 0.
    """
    started: list[QuiverServer] = []

    def start(data_dir: Path | None = None, extra: list[str] | None = None, bucket: S3Bucket | None = None) -> QuiverServer:
        if bucket is not None:
            data_dir = bucket.local_dir
        elif data_dir is None and ON_S3:
            bucket = request.getfixturevalue("s3").new_bucket()
            data_dir = bucket.local_dir
        elif data_dir is None:
            data_dir = tmp_path_factory.mktemp(SECRET) / "data"
            data_dir.mkdir()
        logs = tmp_path_factory.mktemp("quiver-log")
        srv = launch(quiver_bin, data_dir, logs / "serve.log", extra, bucket=bucket)
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




# --- storage ---------------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On S3 (QUIVER_TEST_STORAGE=s3), skip the tests marked local_storage:
    they have pyrosome write into the server's data dir, which only exists on
    a local disk."""
    if not ON_S3:
        return
    skip = pytest.mark.skip(reason="pyrosome writes a local data dir (QUIVER_TEST_STORAGE=s3)")
    for item in items:
        if "local_storage" in item.keywords:
            item.add_marker(skip)
