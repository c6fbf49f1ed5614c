"""The Quiver client: connect() and Client."""

from __future__ import annotations

import builtins
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from . import _errors
from ._convert import MAX_BATCH_BYTES, Source, conform_layout, to_source
from ._types import (
    BreakLockResult,
    PutResult,
    RemoveOldVersionsResult,
    SweepResult,
    VerifyResult,
    VersionList,
)

if TYPE_CHECKING:
    import pandas
    import polars

__all__ = ["Client", "ProfileInfo", "connect"]

log = logging.getLogger("quiver")

DEFAULT_SERVER = "localhost:8815"

ProfilePath = str | Sequence[str]
"""A profile: "sales/orders" or its keys, ("sales", "orders")."""

Version = int | str | None
"""A version: 3, "v3", "3", "latest" or None (the latest)."""

PartitionValue = str | int | float | bool | None
FilterTerm = tuple[str, str, Any]

_T = TypeVar("_T")

# Operators of filter= terms (column, op, value); sent in the JSON form of
# docs/protocol.md ("not in" as {"or": [{"not": {... "in" ...}}, is_null]}:
# pyarrow.parquet's filters= keep the null rows of a "not in", where the
# server's `in`, as SQL's, is null on a null).
FILTER_OPS = frozenset({"=", "!=", "<", "<=", ">", ">=", "in", "not in", "is_null", "not_null"})
_JSON_FORM_KEYS = ({"col", "op"}, {"col", "op", "value"}, {"and"}, {"or"}, {"not"})


def _pem(value: bytes | str | os.PathLike[str] | None, what: str) -> bytes | None:
    """PEM bytes from PEM text/bytes or from the path of a PEM file."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.lstrip().startswith("-----BEGIN"):
        return value.encode()
    try:
        with open(value, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {os.fspath(value)!r}: {e.strerror}") from None


def _location(url: str, tls: bool) -> str:
    """A Flight location from "host:port", "grpc://host:port",
    "grpc+tls://host:port" (or "grpc+tcp://", "grpc+unix://")."""
    url = url.strip()
    if not url:
        raise ValueError("empty server address: want host:port, grpc://host:port or grpc+tls://host:port")
    if "://" not in url:
        return ("grpc+tls://" if tls else "grpc+tcp://") + url
    scheme = url.split("://", 1)[0]
    if scheme not in ("grpc", "grpc+tcp", "grpc+tls", "grpc+unix"):
        raise ValueError(f"server address {url!r}: want host:port, grpc://host:port or grpc+tls://host:port")
    if tls and scheme != "grpc+tls":
        raise ValueError(f"TLS options were given but {url!r} is not a grpc+tls:// address")
    return url


def _path(path: ProfilePath) -> str:
    if isinstance(path, str):
        p = path.strip("/")
    else:
        p = "/".join(k.strip("/") for k in path)
    if not p:
        raise ValueError("a profile path is required, e.g. 'sales/orders'")
    return p


def _json_value(v: Any) -> Any:
    """A filter or partition value as JSON: dates and times in ISO 8601,
    decimals as strings."""
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_json_value(x) for x in v]
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    raise TypeError(f"cannot send {v!r} ({type(v).__name__}): want str, int, float, bool, None, a date or a list of them")


def _filter_json(filter: Any) -> dict[str, Any]:
    """filter= (but a pyarrow expression) as the wire's JSON form.

    Takes a list of (column, op, value) tuples, as pyarrow.parquet's
    filters= (ANDed), one such tuple, a mapping {column: value} meaning
    equality (a list value meaning "in"), or a filter already in the JSON
    form ({"col": ..., "op": ..., "value": ...}, {"and": [...]}, ...).
    """
    if isinstance(filter, Mapping):
        if set(filter) in _JSON_FORM_KEYS and (
            "col" in filter or isinstance(next(iter(filter.values())), (list, tuple, Mapping))
        ):
            return json.loads(json.dumps(filter, default=_json_value))
        items = [(c, "in" if isinstance(v, (list, tuple, set, frozenset)) else "=", v) for c, v in filter.items()]
    elif isinstance(filter, tuple) and len(filter) == 3 and isinstance(filter[0], str):
        items = [filter]
    elif isinstance(filter, str):
        raise TypeError(
            "filter= takes a pyarrow.compute expression (pc.field('total') > 100), a list of "
            "(column, op, value) tuples or the JSON form, not a string"
        )
    else:
        items = list(filter)
    out: list[dict[str, Any]] = []
    for term in items:
        if not isinstance(term, (tuple, list)) or len(term) != 3:
            raise ValueError(f"filter term {term!r}: want (column, op, value)")
        col, op, val = term
        if not isinstance(col, str) or not col:
            raise ValueError(f"filter term {term!r}: the column must be a name")
        op = "=" if op == "==" else str(op).lower()
        if op not in FILTER_OPS:
            raise ValueError(f"filter term {term!r}: op must be one of {sorted(FILTER_OPS)}")
        if op in ("in", "not in") and not isinstance(val, (list, tuple, set, frozenset)):
            raise ValueError(f"filter term {term!r}: {op!r} wants a list of values")
        if op in ("is_null", "not_null"):
            out.append({"col": col, "op": op})
        elif op == "not in":
            out.append({"or": [{"not": {"col": col, "op": "in", "value": _json_value(val)}}, {"col": col, "op": "is_null"}]})
        else:
            out.append({"col": col, "op": op, "value": _json_value(val)})
    if not out:
        raise ValueError("filter= is empty")
    return out[0] if len(out) == 1 else {"and": out}


def _is_expression(v: Any) -> bool:
    import pyarrow.compute as pc

    return isinstance(v, pc.Expression)


def _seconds(v: float | timedelta | None) -> float | None:
    if v is None:
        return None
    return v.total_seconds() if isinstance(v, timedelta) else float(v)


class _UnknownField(Exception):
    """A read field the server does not take yet (internal)."""

    def __init__(self, field: str):
        super().__init__(field)
        self.field = field


class ProfileInfo:
    """One profile as list() answers it: its path and keys, the rows and
    bytes of its latest version, and that version's schema."""

    __slots__ = ("bytes", "keys", "path", "rows", "schema")

    def __init__(self, keys: tuple[str, ...], rows: int, bytes: int, schema: pa.Schema):
        self.keys = keys
        self.path = "/".join(keys)
        self.rows = rows
        self.bytes = bytes
        self.schema = schema

    def __repr__(self) -> str:
        return f"ProfileInfo(path={self.path!r}, rows={self.rows}, bytes={self.bytes})"


def connect(
    url: str | None = None,
    *,
    token: str | None = None,
    username: str | None = None,
    password: str | None = None,
    tls_root_certs: bytes | str | os.PathLike[str] | None = None,
    cert_chain: bytes | str | os.PathLike[str] | None = None,
    private_key: bytes | str | os.PathLike[str] | None = None,
    disable_server_verification: bool = False,
    timeout: float | None = None,
    threads: int = 4,
    retries: int = 2,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> Client:
    """Connect to a Quiver server.

    Args:
        url: "host:port", "grpc://host:port" or "grpc+tls://host:port";
            default $QUIVER_SERVER, else localhost:8815 (`quiver serve`'s
            default). Any TLS option below turns a bare host:port into TLS.
        token: a bearer token, sent as ``authorization: Bearer <token>``;
            default $QUIVER_TOKEN.
        username, password: log in with the basic-auth handshake instead;
            the session token it answers is used for every call (and
            renewed once when the server says it expired).
        tls_root_certs: the CA that signed the server's certificate: PEM
            bytes or text, or the path of a PEM file.
        cert_chain, private_key: the client certificate and key for mutual
            TLS (PEM, or paths); both or neither.
        disable_server_verification: TLS without checking the server's
            certificate (tests only).
        timeout: seconds each call may take (None: no limit).
        threads: how many endpoints a read fetches at once.
        retries: how many times a put that failed with UNAVAILABLE (the
            server could not be reached, restarted, or its lock was busy)
            is tried again, after 1 s, 2 s, ...; each retry reuses the
            put's request id, so it never writes twice.
        max_batch_bytes: a put sends batches larger than this in slices
            (each batch is one message; the server refuses messages over
            its --max-recv-msg-size, 128 MiB by default).

    The connection is made lazily: an unreachable server shows up as
    ``pyarrow.flight.FlightUnavailableError`` on the first call (with
    username/password, at once: connect logs in).
    """
    return Client(
        url,
        token=token,
        username=username,
        password=password,
        tls_root_certs=tls_root_certs,
        cert_chain=cert_chain,
        private_key=private_key,
        disable_server_verification=disable_server_verification,
        timeout=timeout,
        threads=threads,
        retries=retries,
        max_batch_bytes=max_batch_bytes,
    )


class Client:
    """A connection to one Quiver server. Make it with quiver.connect().

    Every method raises the pyarrow exception the server's status maps to
    (pyarrow.ArrowInvalid for INVALID_ARGUMENT, quiver.NotFoundError — a
    pyarrow.ArrowKeyError and a FileNotFoundError — for NOT_FOUND,
    pyarrow.flight.FlightUnavailableError, FlightUnauthenticatedError,
    FlightUnauthorizedError, ...), carrying the server's message alone;
    pyarrow's full text is on the exception's ``detail``.

    A Client may be used from several threads at once. Close it (or use it
    as a context manager) when done.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        tls_root_certs: bytes | str | os.PathLike[str] | None = None,
        cert_chain: bytes | str | os.PathLike[str] | None = None,
        private_key: bytes | str | os.PathLike[str] | None = None,
        disable_server_verification: bool = False,
        timeout: float | None = None,
        threads: int = 4,
        retries: int = 2,
        max_batch_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        """See quiver.connect()."""
        url = url or os.environ.get("QUIVER_SERVER") or DEFAULT_SERVER
        if (cert_chain is None) != (private_key is None):
            raise ValueError("cert_chain and private_key go together (mutual TLS)")
        if threads < 1:
            raise ValueError("threads must be at least 1")
        if retries < 0:
            raise ValueError("retries must be at least 0")
        if token is not None and username is not None:
            raise ValueError("give token= or username=/password=, not both")
        if (username is None) != (password is None):
            raise ValueError("username and password go together")
        if disable_server_verification and cert_chain is not None:
            # pyarrow sends no client certificate on a connection that does
            # not verify the server: the handshake would fail obscurely
            raise ValueError("disable_server_verification=True cannot be combined with a client certificate "
                             "(pyarrow would not send it): give tls_root_certs= instead")
        tls = tls_root_certs is not None or cert_chain is not None or disable_server_verification
        self.url = _location(url, tls)
        kwargs: dict[str, Any] = {}
        if (ca := _pem(tls_root_certs, "tls_root_certs")) is not None:
            kwargs["tls_root_certs"] = ca
        if cert_chain is not None:
            kwargs["cert_chain"] = _pem(cert_chain, "cert_chain")
            kwargs["private_key"] = _pem(private_key, "private_key")
        if disable_server_verification:
            kwargs["disable_server_verification"] = True
        self._fc = flight.connect(self.url, **kwargs)
        self._timeout = timeout
        self.threads = threads
        self.retries = retries
        self.max_batch_bytes = max_batch_bytes
        self._login = (username, password) if username is not None else None
        self._lock = threading.Lock()
        self._headers: list[tuple[bytes, bytes]] = []
        tok = token if token is not None else (None if self._login else os.environ.get("QUIVER_TOKEN"))
        if tok:
            self._headers = [(b"authorization", f"Bearer {tok}".encode())]
        if self._login:
            self._authenticate()
        # None until the server has told whether it takes "limit" in a read
        self._server_limit: bool | None = None

    # --- plumbing -------------------------------------------------------------

    def _authenticate(self) -> None:
        assert self._login is not None
        user, pw = self._login
        try:
            header = self._fc.authenticate_basic_token(user, pw, flight.FlightCallOptions(timeout=self._timeout))
        except pa.ArrowException as e:
            raise _errors.translate(e, self.url) from None
        with self._lock:
            self._headers = [header] if header and header[0] else []

    def _options(self) -> flight.FlightCallOptions:
        with self._lock:
            headers = list(self._headers)
        return flight.FlightCallOptions(timeout=self._timeout, headers=headers)

    def _call(
        self,
        fn: Callable[[flight.FlightCallOptions], _T],
        *,
        profile: str | None = None,
        again: Callable[[], bool] = lambda: True,
    ) -> _T:
        """Run one RPC (fn gets the call options), translating its errors;
        with basic auth an expired session is renewed once (if again()
        says the call can be made again)."""
        for attempt in (0, 1):
            try:
                return fn(self._options())
            except flight.FlightUnauthenticatedError as e:
                if attempt == 0 and self._login is not None and again():
                    self._authenticate()
                    continue
                hint = "" if self._headers else "(pass token= or username=/password= to quiver.connect, or set QUIVER_TOKEN)"
                raise _errors.translate(e, self.url, hint=hint) from None
            except (pa.ArrowKeyError, flight.FlightUnauthorizedError) as e:
                raise self._not_found(e, profile) from None
            except pa.ArrowException as e:
                raise _errors.translate(e, self.url) from None
        raise AssertionError("unreachable")

    def _not_found(self, exc: BaseException, profile: str | None) -> BaseException:
        """NOT_FOUND (or PERMISSION_DENIED for a name outside the caller's
        key prefixes), with "did you mean …?" when the profile name looks
        mistyped: suggestions come from list(), so they only ever name
        profiles this caller may see."""
        _, msg = _errors.clean_message(exc)
        hint = ""
        misnamed = "profile not found" in msg or "outside the identity's key prefixes" in msg
        if profile and misnamed and "did you mean" not in msg:
            try:
                names = [p.path for p in self.list()]
            except Exception:  # a suggestion is a nicety: never mask the error
                names = []
            if close := _errors.suggest(profile, names):
                hint = "(did you mean " + " or ".join(close) + "?)"
        return _errors.translate(exc, self.url, hint=hint)

    def close(self) -> None:
        """Close the connection."""
        self._fc.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"quiver.Client({self.url!r})"

    # --- reads ------------------------------------------------------------------

    def _read_command(
        self,
        path: str,
        columns: Sequence[str] | None,
        version: Version,
        partition: Mapping[str, PartitionValue | Sequence[PartitionValue]] | None,
        filter: Any,
        limit: int | None,
    ) -> dict[str, Any]:
        cmd: dict[str, Any] = {"path": path}
        if version is not None:
            cmd["version"] = version
        if partition:
            cmd["partition"] = {str(k): _json_value(v) for k, v in partition.items()}
        if columns is not None:
            if isinstance(columns, str):
                raise TypeError("columns= wants a list of names, e.g. ['id']")
            cmd["columns"] = list(columns)
        if filter is not None:
            if _is_expression(filter):
                cmd["filter"] = {"substrait": self._substrait(path, version, filter)}
            else:
                cmd["filter"] = _filter_json(filter)
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise ValueError(f"limit= must be a non-negative int, not {limit!r}")
            cmd["limit"] = limit
        return cmd

    def _substrait(self, path: str, version: Version, expr: Any) -> str:
        """A pyarrow.compute expression as base64 Substrait, its columns
        named by the profile's schema."""
        import base64

        import pyarrow.substrait as ps

        schema = self.schema(path, version)
        try:
            raw = ps.serialize_expressions([expr], ["filter"], schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError) as e:
            raise ValueError(f"filter={expr}: {e}") from None
        return base64.b64encode(bytes(raw)).decode()

    def _plan(self, cmd: dict[str, Any]) -> tuple[flight.FlightInfo, int | None]:
        """GetFlightInfo for a read; returns the plan and the row limit the
        client must apply itself (when the server does not take "limit")."""
        local_limit = None
        if "limit" in cmd and self._server_limit is False:
            cmd = dict(cmd)
            local_limit = cmd.pop("limit")
        desc = flight.FlightDescriptor.for_command(json.dumps(cmd).encode())

        def plan(o: flight.FlightCallOptions) -> flight.FlightInfo:
            try:
                return self._fc.get_flight_info(desc, o)
            except pa.ArrowInvalid as e:
                field = _errors.unknown_field(e)
                if field in ("filter", "limit") and field in cmd:
                    raise _UnknownField(field) from None
                raise

        try:
            info = self._call(plan, profile=cmd["path"])
        except _UnknownField as u:
            if u.field == "filter":
                raise pa.ArrowNotImplementedError(
                    f"filter= needs a server with row filters, and the one at {self.url} does not have "
                    "them yet: read without filter= and filter the result (pyarrow.compute, polars), "
                    "or use partition= for partition columns"
                ) from None
            # A server that predates "limit": fetch endpoints in order until
            # there are enough rows.
            self._server_limit = False
            return self._plan(cmd)
        if "limit" in cmd:
            self._server_limit = True
        return info, local_limit

    def _endpoint_reader(self, ticket: flight.Ticket, profile: str) -> flight.FlightStreamReader:
        return self._call(lambda o: self._fc.do_get(ticket, o), profile=profile)

    def _fetch(self, ticket: flight.Ticket, profile: str) -> pa.Table:
        def get(o: flight.FlightCallOptions) -> pa.Table:
            return self._fc.do_get(ticket, o).read_all()

        return self._call(get, profile=profile)

    def _head(self, info: flight.FlightInfo, limit: int, profile: str) -> pa.Table:
        """The first limit rows of a plan: endpoints in order, each stream
        cancelled once enough rows arrived."""
        batches: list[pa.RecordBatch] = []
        need = limit
        for ep in info.endpoints:
            if need <= 0:
                break
            rdr = self._endpoint_reader(ep.ticket, profile)
            try:
                while need > 0:
                    try:
                        chunk = rdr.read_chunk()
                    except StopIteration:
                        break
                    except pa.ArrowException as e:
                        raise _errors.translate(e, self.url) from None
                    b = chunk.data
                    if b is None:
                        continue
                    if b.num_rows > need:
                        b = b.slice(0, need)
                    batches.append(b)
                    need -= b.num_rows
            finally:
                if need <= 0:
                    rdr.cancel()
        return pa.Table.from_batches(batches, schema=info.schema) if batches else info.schema.empty_table()

    def _fetch_all(self, info: flight.FlightInfo, profile: str, threads: int) -> pa.Table:
        eps = list(info.endpoints)
        if not eps:
            return info.schema.empty_table()
        if len(eps) == 1 or threads <= 1:
            tables = [self._fetch(ep.ticket, profile) for ep in eps]
        else:
            with ThreadPoolExecutor(max_workers=min(threads, len(eps)), thread_name_prefix="quiver-read") as pool:
                futures = [pool.submit(self._fetch, ep.ticket, profile) for ep in eps]
                try:
                    tables = [f.result() for f in futures]
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
        if len(tables) == 1:
            return tables[0]
        return pa.concat_tables(tables)

    def read(
        self,
        path: ProfilePath,
        columns: Sequence[str] | None = None,
        *,
        filter: Any = None,
        version: Version = None,
        limit: int | None = None,
        partition: Mapping[str, PartitionValue | Sequence[PartitionValue]] | None = None,
        threads: int | None = None,
    ) -> pa.Table:
        """Read a profile into a pyarrow Table.

        The read is planned once (GetFlightInfo: one version, the exact
        committed files), then its endpoints are fetched in parallel
        threads and put together in order, so the result is one
        consistent snapshot even while new data is written.

        Args:
            path: the profile, "sales/orders" or ("sales", "orders").
            columns: the columns to read, in this order (default: all).
            filter: rows to keep: a pyarrow.compute expression
                (``pc.field("total") > 100``, sent as Substrait), a list of
                (column, op, value) tuples (ANDed; op is =, !=, <, <=, >,
                >=, in, not in, is_null, not_null), {column: value}, or the
                JSON form of docs/protocol.md. The server prunes partitions
                and row groups by it and filters the rest; filter columns
                need not be in columns=. A server without row filters
                answers pyarrow.ArrowNotImplementedError.
            version: 3, "v3" or None for the latest.
            limit: at most this many rows, the first ones in the profile's
                order. Sent to the server as "limit"; with a server that
                does not take it yet, the client stops reading once it has
                enough rows.
            partition: keep only these hive partitions, e.g.
                {"region": "eu"} or {"region": ["eu", "us"]} (None is the
                null partition); pruned before any file is opened.
            threads: endpoints fetched at once (default: the client's).

        Raises:
            quiver.NotFoundError: no such profile or version (with a
                suggestion when the name looks mistyped).
            pyarrow.ArrowInvalid: an unknown column, a partition filter on
                a column that is not a partition column, a bad version, a
                filter on a column that does not exist or with a value of
                another type.
        """
        p = _path(path)
        cmd = self._read_command(p, columns, version, partition, filter, limit)
        info, local_limit = self._plan(cmd)
        if local_limit is not None:
            return self._head(info, local_limit, p)
        return self._fetch_all(info, p, threads or self.threads)

    def read_batches(
        self,
        path: ProfilePath,
        columns: Sequence[str] | None = None,
        *,
        filter: Any = None,
        version: Version = None,
        limit: int | None = None,
        partition: Mapping[str, PartitionValue | Sequence[PartitionValue]] | None = None,
    ) -> pa.RecordBatchReader:
        """Like read(), as a stream of record batches: one endpoint after
        the other, never the whole profile in memory. For data larger than
        memory, e.g. ``pyarrow.dataset.write_dataset(q.read_batches(p), ...)``.
        """
        p = _path(path)
        cmd = self._read_command(p, columns, version, partition, filter, limit)
        info, local_limit = self._plan(cmd)

        def gen() -> Iterator[pa.RecordBatch]:
            need = local_limit
            for ep in info.endpoints:
                if need is not None and need <= 0:
                    return
                rdr = self._endpoint_reader(ep.ticket, p)
                try:
                    while True:
                        try:
                            chunk = rdr.read_chunk()
                        except StopIteration:
                            break
                        except pa.ArrowException as e:
                            raise _errors.translate(e, self.url) from None
                        b = chunk.data
                        if b is None:
                            continue
                        if need is not None:
                            if b.num_rows >= need:
                                yield b.slice(0, need)
                                need = 0
                                rdr.cancel()
                                return
                            need -= b.num_rows
                        yield b
                except GeneratorExit:
                    rdr.cancel()
                    raise

        return pa.RecordBatchReader.from_batches(info.schema, gen())

    def read_polars(self, path: ProfilePath, columns: Sequence[str] | None = None, **kwargs: Any) -> polars.DataFrame:
        """read() as a polars DataFrame (needs polars: pip install 'quiverdb[polars]')."""
        import polars as pl

        return pl.from_arrow(self.read(path, columns, **kwargs))  # type: ignore[return-value]

    def read_pandas(self, path: ProfilePath, columns: Sequence[str] | None = None, **kwargs: Any) -> pandas.DataFrame:
        """read() as a pandas DataFrame (needs pandas: pip install 'quiverdb[pandas]')."""
        return self.read(path, columns, **kwargs).to_pandas()

    def scan_polars(
        self,
        path: ProfilePath,
        *,
        version: Version = None,
        partition: Mapping[str, PartitionValue | Sequence[PartitionValue]] | None = None,
    ) -> polars.LazyFrame:
        """A polars LazyFrame over one snapshot of a profile.

        The read is planned now (so a missing profile fails here, and later
        writes do not change what it sees); the data is fetched when the
        frame is collected, with polars' projection pushed down to the
        server (only the columns the query uses travel), its row limit
        stopping the fetch early, and its filter applied to each batch.
        """
        import polars as pl

        p = _path(path)
        info, _ = self._plan(self._read_command(p, None, version, partition, None, None))
        pl_schema = pl.from_arrow(info.schema.empty_table()).schema  # type: ignore[union-attr]
        tickets = [ep.ticket.ticket for ep in info.endpoints]

        try:
            from polars.io.plugins import register_io_source
        except ImportError:  # an older polars: read eagerly
            return pl.from_arrow(self._fetch_all(info, p, self.threads)).lazy()  # type: ignore[union-attr]

        def source(
            with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: int | None
        ) -> Iterator[polars.DataFrame]:
            need = n_rows
            for raw in tickets:
                if need is not None and need <= 0:
                    return
                while True:
                    limited = need is not None and predicate is None and self._server_limit is not False
                    t = raw
                    if (with_columns is not None or limited) and raw[:1] == b"{":
                        # endpoint tickets are JSON read requests (docs/protocol.md):
                        # project the pinned snapshot to the columns the query uses,
                        # and stop the server once the rows polars wants are sent
                        # (when no predicate is applied here after it)
                        body = json.loads(raw)
                        if with_columns is not None:
                            body["columns"] = list(with_columns)
                        if limited:
                            body["limit"] = need
                        t = json.dumps(body).encode()
                    rdr = self._endpoint_reader(flight.Ticket(t), p)
                    got_any = False
                    try:
                        while True:
                            try:
                                chunk = rdr.read_chunk()
                            except StopIteration:
                                break
                            except pa.ArrowException as e:
                                if not got_any and limited and _errors.unknown_field(e) == "limit":
                                    raise _UnknownField("limit") from None
                                raise _errors.translate(e, self.url) from None
                            got_any = True
                            if chunk.data is None:
                                continue
                            df = pl.from_arrow(chunk.data)
                            assert isinstance(df, pl.DataFrame)
                            if with_columns is not None:
                                df = df.select(with_columns)
                            if predicate is not None:
                                df = df.filter(predicate)
                            if need is not None:
                                if df.height >= need:
                                    yield df.head(need)
                                    need = 0
                                    rdr.cancel()
                                    return
                                need -= df.height
                            yield df
                    except _UnknownField:
                        # a server that predates "limit": read this endpoint again without it
                        self._server_limit = False
                        continue
                    except GeneratorExit:
                        rdr.cancel()
                        raise
                    break

        return register_io_source(source, schema=pl_schema)

    def schema(self, path: ProfilePath, version: Version = None) -> pa.Schema:
        """The Arrow schema of a profile's latest (or a given) version, with
        the metadata it was written with."""
        p = _path(path)
        cmd: dict[str, Any] = {"path": p}
        if version is not None:
            cmd["version"] = version
        desc = flight.FlightDescriptor.for_command(json.dumps(cmd).encode())
        return self._call(lambda o: self._fc.get_schema(desc, o).schema, profile=p)

    def list(self, prefix: ProfilePath = "") -> list[ProfileInfo]:
        """The profiles under a key prefix ("sales" matches sales/orders,
        not salesman/x), or all of them; only those the caller may read."""
        crit = prefix if isinstance(prefix, str) else "/".join(prefix)

        def ls(o: flight.FlightCallOptions) -> list[ProfileInfo]:
            out = []
            for fi in self._fc.list_flights(crit.encode(), o):
                keys = tuple(k.decode() if isinstance(k, bytes) else k for k in fi.descriptor.path)
                out.append(ProfileInfo(keys, fi.total_records, fi.total_bytes, fi.schema))
            return out

        return self._call(ls)

    # --- puts ---------------------------------------------------------------------

    def write(
        self,
        path: ProfilePath,
        data: Any,
        *,
        partition_by: Sequence[str] | None = None,
        schema_version: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> PutResult:
        """Write data as a new version of a profile (creating the profile).

        Readers keep seeing the previous version until the write commits;
        a write that fails or is interrupted commits nothing.

        Args:
            path: the profile, "sales/orders" or ("sales", "orders").
            data: a pyarrow Table, RecordBatch or RecordBatchReader, a
                polars or pandas DataFrame (the pandas index is not
                stored), a dict of columns, or any Arrow C stream.
            partition_by: hive partition columns, e.g. ["region"].
            schema_version: stamped into every file, e.g. "1.2.0".
            metadata: a JSON object copied into the commit record.
            request_id: the idempotency key (default: a fresh one per
                call). Retries reuse it, and the server answers a put
                whose id it has already committed with that commit's
                record, writing nothing.

        Returns:
            The commit record: version, index, rows, files with SHA-256, ...
        """
        cmd: dict[str, Any] = {"mode": "write"}
        if partition_by:
            if isinstance(partition_by, str):
                raise TypeError("partition_by= wants a list of column names, e.g. ['region']")
            cmd["partition_by"] = list(partition_by)
        return self._put(path, data, cmd, schema_version, metadata, request_id)

    def append(
        self,
        path: ProfilePath,
        data: Any,
        *,
        schema_version: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        request_id: str | None = None,
    ) -> PutResult:
        """Append data to the latest version of a profile (creating the
        profile if needed). Columns are matched by name (reordered) and
        losslessly widened to the version's types; anything else is
        pyarrow.ArrowInvalid. Arguments as for write()."""
        return self._put(path, data, {"mode": "append"}, schema_version, metadata, request_id)

    def _put(
        self,
        path: ProfilePath,
        data: Any,
        cmd: dict[str, Any],
        schema_version: str | None,
        metadata: Mapping[str, Any] | None,
        request_id: str | None,
    ) -> PutResult:
        p = _path(path)
        cmd = {"path": p, **cmd}
        if schema_version is not None:
            cmd["schema_version"] = schema_version
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise TypeError("metadata= must be a dict (a JSON object)")
            cmd["metadata"] = dict(metadata)
        cmd["request_id"] = request_id or new_request_id()
        body = json.dumps(cmd).encode()
        source = to_source(data)
        conformed = False
        attempt = 0
        while True:
            try:
                return self._put_once(body, source, p)
            except pa.ArrowInvalid as e:
                # polars and pandas make large_string columns, pyarrow string
                # ones: an append whose columns differ from the profile's only
                # in such layouts is cast to the profile's types and sent again
                # (pyrosome's append casts to the existing schema too).
                if conformed or cmd["mode"] != "append" or source.table is None or "schema mismatch" not in str(e):
                    raise
                conformed = True
                try:
                    target = self.schema(p)
                except pa.ArrowException:
                    raise e from None
                table = conform_layout(source.table, target)
                if table is None:
                    raise
                source = to_source(table)
            except flight.FlightUnavailableError as e:
                attempt += 1
                if attempt > self.retries or not source.replayable:
                    raise
                wait = float(attempt)
                log.warning("put to %s failed (%s); retrying in %gs with request id %s", p, e, wait, cmd["request_id"])
                time.sleep(wait)

    def _put_once(self, body: bytes, source: Source, profile: str) -> PutResult:
        """One attempt: open the stream, send every batch, read the result.

        If sending fails on our side (the data source raised, or Ctrl-C),
        the stream is made to fail so that the server commits nothing:
        pyarrow has no way to cancel a DoPut, and closing its writer (or
        dropping it) would end the stream normally — a commit of what was
        sent so far. A message with only app_metadata is not a valid put
        message, so the server fails the put.
        """
        desc = flight.FlightDescriptor.for_command(body)

        def attempt(o: flight.FlightCallOptions) -> PutResult:
            writer, results = self._fc.do_put(desc, source.schema, o)
            it = source.batches(self.max_batch_bytes)
            while True:
                try:
                    batch = next(it)
                except StopIteration:
                    break
                except BaseException:
                    _abort(writer)
                    raise
                try:
                    writer.write_batch(batch)
                except pa.ArrowException:
                    # The server ended the stream: its status says why.
                    writer.close()
                    raise
                except BaseException:
                    _abort(writer)
                    raise
            writer.done_writing()
            buf = results.read()
            writer.close()
            if buf is None:
                raise pa.ArrowInvalid("the server answered the put without a result")
            return json.loads(buf.to_pybytes())

        return self._call(attempt, profile=profile, again=lambda: source.replayable)

    # --- actions ---------------------------------------------------------------------

    def _action(self, name: str, body: Mapping[str, Any], *, profile: str | None = None) -> builtins.list[Any]:
        raw = json.dumps(body).encode()

        def act(o: flight.FlightCallOptions) -> builtins.list[Any]:
            return [json.loads(r.body.to_pybytes()) for r in self._fc.do_action(flight.Action(name, raw), o)]

        return self._call(act, profile=profile)

    def _action1(self, name: str, body: Mapping[str, Any], *, profile: str | None = None) -> Any:
        res = self._action(name, body, profile=profile)
        if len(res) != 1:
            raise pa.ArrowInvalid(f"{name} answered {len(res)} results, want 1")
        return res[0]

    def versions(self, path: ProfilePath) -> VersionList:
        """Every version of a profile, oldest first: files, rows, bytes,
        commits, schema version, partitioning; and which one is latest."""
        p = _path(path)
        return self._action1("list-versions", {"path": p}, profile=p)

    def lineage(self, path: ProfilePath) -> builtins.list[PutResult]:
        """The profile's commit records, oldest first: who committed what,
        when, with the SHA-256 of each file."""
        p = _path(path)
        return self._action("lineage", {"path": p}, profile=p)

    def verify(
        self,
        path: ProfilePath | None = None,
        *,
        prefix: ProfilePath | None = None,
        sample: float | None = None,
        seed: int | None = None,
        public_key: str | bytes | None = None,
    ) -> VerifyResult:
        """Re-hash committed files against their commit records.

        Args:
            path: one profile; or prefix: the profiles under a key prefix;
                neither: the whole data directory.
            sample: re-hash only this fraction of the files (0 < sample <=
                1; every file is still listed and its size checked).
            seed: the same seed samples the same files.
            public_key: an ed25519 public key (PEM, or 32 bytes in hex or
                base64): every commit record must carry a valid signature
                by its private key.

        Returns:
            {"ok": bool, "checked_files": n, "problems": [...], ...}; ok is
            False when anything is wrong (this does not raise).
        """
        if path is not None and prefix is not None:
            raise ValueError("give path= or prefix=, not both")
        body: dict[str, Any] = {}
        profile = None
        if path is not None:
            profile = body["path"] = _path(path)
        if prefix is not None:
            body["prefix"] = prefix if isinstance(prefix, str) else "/".join(prefix)
        if sample is not None:
            body["sample"] = float(sample)
        if seed is not None:
            body["seed"] = int(seed)
        if public_key is not None:
            body["public_key"] = public_key.decode() if isinstance(public_key, bytes) else public_key
        return self._action1("verify", body, profile=profile)

    def remove_old_versions(
        self, path: ProfilePath, *, keep: int = 1, grace: float | timedelta | None = None
    ) -> RemoveOldVersionsResult:
        """Admin: remove all but the newest keep versions (never the latest;
        never one superseded less than grace ago — seconds or a timedelta,
        default the server's --grace; 0 removes at once)."""
        p = _path(path)
        body: dict[str, Any] = {"path": p, "keep": keep}
        if grace is not None:
            body["grace_s"] = _seconds(grace)
        return self._action1("remove-old-versions", body, profile=p)

    def sweep(self, *, older_than: float | timedelta | None = None) -> SweepResult:
        """Admin: remove what killed writers left behind (temp files,
        uncommitted files, abandoned versions) older than older_than
        (seconds or a timedelta; default one hour)."""
        body: dict[str, Any] = {}
        if older_than is not None:
            body["older_than_s"] = _seconds(older_than)
        return self._action1("sweep", body)

    def compact(self, path: ProfilePath) -> PutResult:
        """Admin: rewrite the latest version as a new one with few large
        files; answers the new version's commit record."""
        p = _path(path)
        return self._action1("compact", {"path": p}, profile=p)

    def break_lock(self, path: ProfilePath) -> BreakLockResult:
        """Admin: break a profile's manifest lock if its owner is provably
        gone (or the lock is older than the stale limit)."""
        p = _path(path)
        return self._action1("break-lock", {"path": p}, profile=p)


def _abort(writer: flight.FlightStreamWriter) -> None:
    """Make an open put fail on the server so that it commits nothing (see
    Client._put_once), and release the stream."""
    try:
        writer.write_metadata(b"quiver-client: put aborted")
        writer.done_writing()
    except Exception:
        pass
    try:
        writer.close()
    except Exception:
        pass


def new_request_id() -> str:
    """A fresh request id: "quiver-py-" and 24 hex digits (the Go client's
    are "quiver-go-…")."""
    return "quiver-py-" + secrets.token_hex(12)
