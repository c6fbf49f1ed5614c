"""Authentication and authorization as a pyarrow client meets them: bearer
tokens in FlightCallOptions headers, the basic-auth handshake
(authenticate_basic_token), roles and key prefixes, and the exception
classes they arrive as (FlightUnauthenticatedError, FlightUnauthorizedError)."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from helpers import SECRET, cmd

# bcrypt (cost 4) of "pw-for-tests", made once with golang.org/x/crypto/bcrypt
ALICE_BCRYPT = "$2a$04$mHCBmroBsEx/FM6dsuklweOk/BhTZeuxReSEofsT67OQAzlVoHS4O"

TOKENS = {
    "admin": ("tok-admin-0123456789", "admin"),
    "writer": ("tok-writer-0123456789", "write"),
    "reader": ("tok-reader-0123456789", "read"),
    "sales-reader": ("tok-sales-0123456789", "read"),
    "expired": ("tok-expired-0123456789", "admin"),
}


def sha(tok: str) -> str:
    return hashlib.sha256(tok.encode()).hexdigest()


@pytest.fixture(scope="module")
def auth_server(start_server, tmp_path_factory):
    tokens = []
    for ident, (tok, role) in TOKENS.items():
        entry = {"sha256": sha(tok), "identity": ident, "role": role}
        if ident == "sales-reader":
            entry["prefixes"] = ["sales"]
        if ident == "expired":
            entry["expires"] = "2001-01-01T00:00:00Z"
        tokens.append(entry)
    auth = tmp_path_factory.mktemp("auth") / "auth.json"
    auth.write_text(json.dumps({"users": [{"name": "alice", "password_bcrypt": ALICE_BCRYPT, "role": "write"}], "tokens": tokens}))
    auth.chmod(0o600)
    srv = start_server(extra=["--auth-file", str(auth)])
    admin = opts("admin")
    c = srv.client()
    for path in ("sales/orders", "other/p"):
        put_as(c, admin, path, pa.table({"id": [1, 2]}))
    return srv


def opts(ident: str) -> flight.FlightCallOptions:
    return flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKENS[ident][0]}".encode())], timeout=30)


def put_as(c, options, path, table, **fields) -> dict:
    writer, reader = c.do_put(cmd(path, **fields), table.schema, options=options)
    writer.write_table(table)
    writer.done_writing()
    buf = reader.read()
    writer.close()
    return json.loads(buf.to_pybytes())


def get_as(c, options, path) -> pa.Table:
    return c.do_get(flight.Ticket(path.encode()), options=options).read_all()


def test_no_or_bad_credentials_are_unauthenticated(auth_server):
    c = auth_server.client()
    with pytest.raises(flight.FlightUnauthenticatedError, match="authentication required") as e:
        get_as(c, flight.FlightCallOptions(timeout=30), "sales/orders")
    assert SECRET not in str(e.value)
    with pytest.raises(flight.FlightUnauthenticatedError):
        list(c.list_flights(options=flight.FlightCallOptions(timeout=30)))
    bad = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer not-a-token")])
    with pytest.raises(flight.FlightUnauthenticatedError, match="invalid or expired credentials"):
        get_as(c, bad, "sales/orders")
    with pytest.raises(flight.FlightUnauthenticatedError):
        get_as(c, opts("expired"), "sales/orders")
    with pytest.raises(flight.FlightUnauthenticatedError):
        put_as(c, bad, "sales/orders", pa.table({"id": [3]}))


def test_roles(auth_server):
    c = auth_server.client()
    # read: may read, not write, not administer
    assert get_as(c, opts("reader"), "sales/orders").num_rows == 2
    with pytest.raises(flight.FlightUnauthorizedError, match="needs role write") as e:  # gRPC PERMISSION_DENIED
        put_as(c, opts("reader"), "sales/orders", pa.table({"id": [3]}))
    assert "reader" in str(e.value) and SECRET not in str(e.value)
    with pytest.raises(flight.FlightUnauthorizedError, match="needs role admin"):
        list(c.do_action(flight.Action("sweep", b"{}"), options=opts("reader")))
    assert action1_as(c, opts("reader"), "verify", {"path": "sales/orders"})["ok"] is True
    # write: may put; the identity is the commit's writer
    res = put_as(c, opts("writer"), "sales/orders", pa.table({"id": [3]}))
    assert res["writer"] == "writer"
    with pytest.raises(flight.FlightUnauthorizedError, match="needs role admin"):
        list(c.do_action(flight.Action("compact", json.dumps({"path": "sales/orders"}).encode()), options=opts("writer")))
    # admin: may administer
    assert "removed" in action1_as(c, opts("admin"), "sweep", {})


def test_key_prefixes(auth_server):
    c = auth_server.client()
    o = opts("sales-reader")
    assert get_as(c, o, "sales/orders").num_rows >= 2
    with pytest.raises(flight.FlightUnauthorizedError, match="outside the identity's key prefixes"):
        get_as(c, o, "other/p")
    with pytest.raises(flight.FlightUnauthorizedError):
        c.get_flight_info(flight.FlightDescriptor.for_path("other", "p"), options=o)
    # listing shows only what the identity may read
    assert [i.descriptor.path for i in c.list_flights(options=o)] == [[b"sales", b"orders"]]
    assert len(list(c.list_flights(options=opts("reader")))) == 2
    # verify is narrowed to what the identity may read, like the listing
    mine = action1_as(c, o, "verify", {"prefix": "sales"})
    assert mine["ok"] is True
    assert action1_as(c, o, "verify", {}) == mine
    assert action1_as(c, opts("reader"), "verify", {})["checked_files"] > mine["checked_files"]
    with pytest.raises(flight.FlightUnauthorizedError):
        action1_as(c, o, "verify", {"prefix": "other"})
    with pytest.raises(flight.FlightUnauthorizedError):
        action1_as(c, o, "verify", {"path": "other/p"})


def test_basic_auth_handshake(auth_server):
    c = auth_server.client()
    key, value = c.authenticate_basic_token(b"alice", b"pw-for-tests")
    assert key.lower() == b"authorization" and value.startswith(b"Bearer ")
    session = flight.FlightCallOptions(headers=[(key, value)], timeout=30)
    res = put_as(c, session, "sales/orders", pa.table({"id": [4]}))
    assert res["writer"] == "alice"
    assert 4 in get_as(c, session, "sales/orders").column("id").to_pylist()
    with pytest.raises(flight.FlightUnauthenticatedError):
        c.authenticate_basic_token(b"alice", b"wrong")
    with pytest.raises(flight.FlightUnauthenticatedError):
        c.authenticate_basic_token(b"mallory", b"pw-for-tests")


def action1_as(c, options, name, body) -> dict:
    results = [json.loads(r.body.to_pybytes()) for r in c.do_action(flight.Action(name, json.dumps(body).encode()), options=options)]
    assert len(results) == 1
    return results[0]
