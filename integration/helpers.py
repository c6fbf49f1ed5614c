"""Helpers of the real-clients suite: start/stop a `quiver serve` process and
talk to it with pyarrow.flight. Imported by conftest.py and the test modules.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight

REPO = Path(__file__).resolve().parent.parent
TESTDATA = REPO / "testdata"
PYROSOME_FIXTURE = TESTDATA / "pyrosome-0.1.12"

# Data dirs are named with this marker, so tests can assert that no error
# message ever shows the server's path.
SECRET = "qv-secret-datadir"

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
CALL_TIMEOUT_S = 30.0


# --- one server process ---------------------------------------------------------


@dataclass
class QuiverServer:
    """A running `quiver serve` process."""

    proc: subprocess.Popen
    port: int
    data_dir: Path
    log_path: Path
    clients: list[flight.FlightClient] = field(default_factory=list)
    bucket: S3Bucket | None = None  # set when it serves an S3 bucket

    @property
    def location(self) -> str:
        return f"grpc+tcp://127.0.0.1:{self.port}"

    def client(self) -> flight.FlightClient:
        c = flight.FlightClient(self.location)
        self.clients.append(c)
        return c

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-n:])

    def stop(self) -> int:
        """SIGTERM, wait for the exit, return the exit code."""
        for c in self.clients:
            try:
                c.close()
            except Exception:
                pass
        self.clients.clear()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(
                    f"quiver serve did not exit within {STOP_TIMEOUT_S}s of SIGTERM\n{self.log_tail()}"
                ) from None
        return self.proc.returncode


def _wait_ready(srv: QuiverServer) -> None:
    """Wait until the server answers a Flight RPC (ListActions)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    client = flight.FlightClient(srv.location)
    opts = flight.FlightCallOptions(timeout=2)
    last: Exception | None = None
    try:
        while time.monotonic() < deadline:
            if srv.proc.poll() is not None:
                raise RuntimeError(f"quiver serve exited with {srv.proc.returncode}:\n{srv.log_tail()}")
            try:
                list(client.list_actions(options=opts))
                return
            except flight.FlightUnauthenticatedError:
                return  # it answered: a server with --auth-file wants a token
            except flight.FlightError as e:  # not listening yet
                last = e
            except pa.ArrowException as e:
                last = e
            time.sleep(0.05)
    finally:
        client.close()
    raise RuntimeError(f"quiver serve did not answer within {START_TIMEOUT_S}s ({last}):\n{srv.log_tail()}")


SERVING_RE = re.compile(rb"quiver: serving .* on 127\.0\.0\.1:(\d+)")


def launch(
    binary: Path,
    data_dir: Path,
    log_path: Path,
    extra: list[str] | None = None,
    bucket: S3Bucket | None = None,
) -> QuiverServer:
    """Start `quiver serve --addr 127.0.0.1:0` and wait until it answers.

    The kernel picks a free port (no race with other processes); serve prints
    "quiver: serving <dir> on 127.0.0.1:<port>" once listening. Its stdout
    and stderr (the JSON log) go to log_path. With bucket, it serves the
    bucket (--data-dir s3://…); data_dir is then where versitygw keeps the
    bucket's objects on this machine.
    """
    where = ["--data-dir", str(data_dir)]
    env = None
    if bucket is not None:
        where = ["--data-dir", bucket.url, *bucket.server.flags()]
        env = {**os.environ, **bucket.server.env()}
    out = open(log_path, "wb")
    try:
        proc = subprocess.Popen(
            [str(binary), "serve", *where, "--addr", "127.0.0.1:0", *(extra or [])],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=log_path.parent,
            env=env,
        )
    finally:
        out.close()
    srv = QuiverServer(proc=proc, port=0, data_dir=data_dir, log_path=log_path, bucket=bucket)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"quiver serve exited with {proc.returncode}:\n{srv.log_tail()}")
            if m := SERVING_RE.search(log_path.read_bytes()):
                srv.port = int(m.group(1))
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"quiver serve printed no 'serving' line within {START_TIMEOUT_S}s:\n{srv.log_tail()}")
            time.sleep(0.02)
        _wait_ready(srv)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    return srv


def stop_server(srv: QuiverServer) -> None:
    rc = srv.stop()
    assert rc == 0, f"quiver serve exited {rc} after SIGTERM:\n{srv.log_tail()}"


# --- an S3 server (versitygw) ------------------------------------------------------

# The storage the suite's servers use: QUIVER_TEST_STORAGE=s3 puts the shared
# server (and every start_server() without a data dir) on a bucket.
ON_S3 = os.environ.get("QUIVER_TEST_STORAGE", "").lower() == "s3"

S3_ACCESS_KEY = "quiver-test-access"
S3_SECRET_KEY = "quiver-test-secret-key"
S3_REGION = "us-east-1"


def versitygw_binary() -> Path:
    """versitygw as the Makefile pins it: $QUIVER_VERSITYGW, else
    .tools/bin/versitygw-<VERSITYGW_VERSION>, installed with `make tools`
    (go install through the module proxy) when missing."""
    if env := os.environ.get("QUIVER_VERSITYGW"):
        return Path(env)
    m = re.search(r"^VERSITYGW_VERSION\s*:=\s*(\S+)", (REPO / "Makefile").read_text(), re.M)
    assert m, "no VERSITYGW_VERSION in the Makefile"
    path = REPO / ".tools" / "bin" / f"versitygw-{m.group(1)}"
    if not path.exists():
        proc = subprocess.run(["make", "-C", str(REPO), "tools"], capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"make tools failed:\n{proc.stdout}\n{proc.stderr}")
    return path


@dataclass
class S3Server:
    """A running versitygw (POSIX backend under root) on 127.0.0.1."""

    proc: subprocess.Popen
    port: int
    root: Path
    log_path: Path
    buckets: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def flags(self) -> list[str]:
        return ["--s3-endpoint", self.endpoint, "--s3-path-style"]

    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
            "AWS_REGION": S3_REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def filesystem(self):
        """A pyarrow S3FileSystem of this server."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=S3_ACCESS_KEY,
            secret_key=S3_SECRET_KEY,
            region=S3_REGION,
            endpoint_override=self.endpoint,
            scheme="http",
            allow_bucket_creation=True,
        )

    def new_bucket(self, prefix: str = "quiver/data") -> S3Bucket:
        self.buckets += 1
        name = f"qt-py-{os.getpid()}-{self.buckets}"
        self.filesystem().create_dir(name)
        return S3Bucket(server=self, name=name, prefix=prefix)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class S3Bucket:
    server: S3Server
    name: str
    prefix: str

    @property
    def url(self) -> str:
        return f"s3://{self.name}/{self.prefix}"

    @property
    def local_dir(self) -> Path:
        """Where versitygw keeps the prefix's objects (one file each)."""
        return self.server.root.joinpath(self.name, *self.prefix.split("/"))


def start_versitygw(root: Path) -> S3Server:
    """Start versitygw on a free loopback port over root/data."""
    binary = versitygw_binary()
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    log_path = root / "versitygw.log"
    last = ""
    for _ in range(5):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        args = [str(binary), "--port", f"127.0.0.1:{port}", "--access", S3_ACCESS_KEY, "--secret", S3_SECRET_KEY,
                "--region", S3_REGION, "--quiet", "posix"]
        if not _xattrs_work(data):
            (root / "meta").mkdir(exist_ok=True)
            args += ["--sidecar", str(root / "meta")]
        with open(log_path, "wb") as out:
            proc = subprocess.Popen([*args, str(data)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        srv = S3Server(proc=proc, port=port, root=data, log_path=log_path)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(srv.endpoint + "/", timeout=1) as resp:
                    server_header = resp.headers.get("Server", "")
            except urllib.error.HTTPError as e:  # 403 without credentials: it answered
                server_header = e.headers.get("Server", "")
                e.close()
            except OSError:
                time.sleep(0.02)
                continue
            if "VERSITYGW" in server_header.upper():
                return srv
            break  # another process got the port first: try another
        srv.stop()
        last = log_path.read_text(errors="replace")
    raise RuntimeError(f"versitygw did not start:\n{last}")


def _xattrs_work(d: Path) -> bool:
    probe = d / ".xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.quiver-probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.unlink()


# --- helpers shared by the test modules ---------------------------------------------

OPTS = flight.FlightCallOptions(timeout=CALL_TIMEOUT_S)


def cmd(path: str | None = None, **fields) -> flight.FlightDescriptor:
    """A CMD descriptor: JSON {"path": ..., **fields}."""
    body = dict(fields)
    if path is not None:
        body["path"] = path
    return flight.FlightDescriptor.for_command(json.dumps(body).encode())


def put(
    client: flight.FlightClient,
    descriptor: flight.FlightDescriptor | str,
    data: pa.Table | pa.RecordBatch,
    **fields,
) -> dict:
    """DoPut data (one batch per table chunk) and return the PutResult JSON.

    descriptor is a FlightDescriptor, or a profile path that becomes a CMD
    descriptor with the extra fields (mode=..., partition_by=..., ...).
    """
    if isinstance(descriptor, str):
        descriptor = cmd(descriptor, **fields)
    else:
        assert not fields
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    writer, reader = client.do_put(descriptor, table.schema, options=OPTS)
    for batch in table.to_batches():
        writer.write_batch(batch)
    writer.done_writing()
    buf = reader.read()
    writer.close()
    assert buf is not None, "DoPut sent no PutResult"
    return json.loads(buf.to_pybytes())


def get(client: flight.FlightClient, ticket: str | dict | bytes) -> pa.Table:
    """DoGet a ticket (a bare path, a JSON ticket dict or raw bytes) and read it all."""
    if isinstance(ticket, dict):
        ticket = json.dumps(ticket).encode()
    elif isinstance(ticket, str):
        ticket = ticket.encode()
    return client.do_get(flight.Ticket(ticket), options=OPTS).read_all()


def action(client: flight.FlightClient, name: str, body: dict | None = None) -> list[dict]:
    """DoAction with a JSON body; every Result body parsed as JSON."""
    raw = json.dumps(body if body is not None else {}).encode()
    return [json.loads(r.body.to_pybytes()) for r in client.do_action(flight.Action(name, raw), options=OPTS)]


def action1(client: flight.FlightClient, name: str, body: dict | None = None) -> dict:
    results = action(client, name, body)
    assert len(results) == 1, f"{name} answered {len(results)} results: {results}"
    return results[0]


def profile_dir(srv: QuiverServer, path: str) -> Path:
    return srv.data_dir.joinpath(*path.split("/"))


def write_behind(srv: QuiverServer, name: str, data: bytes | None) -> None:
    """Write (or with None, delete) name, relative to the server's data dir,
    behind the server's back: a file, or on S3 an object put through the S3
    API (versitygw does not know a file written into its directory)."""
    if srv.bucket is None:
        path = srv.data_dir.joinpath(*name.split("/"))
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
        return
    fs = srv.bucket.server.filesystem()
    key = f"{srv.bucket.name}/{srv.bucket.prefix}/{name}"
    if data is None:
        fs.delete_file(key)
    else:
        with fs.open_output_stream(key) as out:
            out.write(data)


def assert_tables_equal(got: pa.Table, want: pa.Table) -> None:
    """Table.equals(check_metadata=True), with a readable diff on failure."""
    if got.equals(want, check_metadata=True):
        return
    lines = []
    if not got.schema.equals(want.schema, check_metadata=True):
        lines.append(f"schema differs:\n--- got\n{got.schema}\n{got.schema.metadata}\n--- want\n{want.schema}\n{want.schema.metadata}")
        for g, w in zip(got.schema, want.schema):
            if not g.equals(w, check_metadata=True):
                lines.append(f"  field {w.name!r}: got {g!r} {g.metadata}, want {w!r} {w.metadata}")
    if got.num_rows != want.num_rows:
        lines.append(f"rows: got {got.num_rows}, want {want.num_rows}")
    elif got.num_columns == want.num_columns:
        for i, name in enumerate(want.column_names):
            if not got.column(i).equals(want.column(i)):
                lines.append(f"column {name!r}: got {got.column(i).to_pylist()}, want {want.column(i).to_pylist()}")
    raise AssertionError("\n".join(lines) or f"tables differ:\n{got}\n{want}")


def copy_fixture(src: Path, dst: Path) -> Path:
    """Copy a data dir (git does not keep pyrosome's read-only bits: restore them)."""
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        if p.is_file() and re.fullmatch(r"\d+\.(parquet|csv)", p.name):
            p.chmod(0o444)
    return dst
