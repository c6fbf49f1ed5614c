"""A pyarrow load client for the reliability suite (reliability/*_test.go).

Puts batches of rows with unique ids for --seconds, each put retried with
its request_id on a random live server (addresses re-read from --addr-file
on every attempt, since the fault test replaces killed servers) until it is
acknowledged. One JSON line per logical put on stdout (the Go test's ledger).

--vanish: instead, start one DoPut to --profile and stream batches forever
(the test SIGKILLs this process mid-stream).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight

SCHEMA = pa.schema([("id", pa.int64()), ("client", pa.string()), ("val", pa.float64())])


def batch(start: int, n: int, client: str) -> pa.RecordBatch:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.record_batch(
        [ids, pa.array([client] * n, pa.string()), pa.array([i * 0.5 for i in range(start, start + n)], pa.float64())],
        schema=SCHEMA,
    )


def code_of(e: BaseException) -> str:
    names = {
        flight.FlightUnavailableError: "Unavailable",
        flight.FlightCancelledError: "Canceled",
        flight.FlightTimedOutError: "DeadlineExceeded",
        flight.FlightInternalError: "Internal",
        flight.FlightUnauthenticatedError: "Unauthenticated",
        flight.FlightUnauthorizedError: "PermissionDenied",
        pa.ArrowInvalid: "InvalidArgument",
        pa.ArrowNotImplementedError: "Unimplemented",
        pa.ArrowKeyError: "NotFound",
    }
    for cls, name in names.items():
        if isinstance(e, cls):
            return name
    return type(e).__name__


def addrs(path: str) -> list[str]:
    for _ in range(100):
        try:
            with open(path) as f:
                out = [l.strip() for l in f if l.strip()]
            if out:
                return out
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise SystemExit("no addresses in " + path)


def put_once(addr: str, desc: flight.FlightDescriptor, b: pa.RecordBatch) -> dict:
    client = flight.FlightClient("grpc+tcp://" + addr)
    try:
        opts = flight.FlightCallOptions(timeout=60)
        writer, reader = client.do_put(desc, SCHEMA, options=opts)
        writer.write_batch(b)
        writer.done_writing()
        buf = reader.read()
        writer.close()
        if buf is None:
            raise RuntimeError("no PutResult")
        return json.loads(buf.to_pybytes())
    finally:
        client.close()


def vanish(a: argparse.Namespace) -> None:
    addr = addrs(a.addr_file)[0]
    client = flight.FlightClient("grpc+tcp://" + addr)
    desc = flight.FlightDescriptor.for_command(json.dumps({"path": a.profiles, "request_id": a.name}).encode())
    writer, _ = client.do_put(desc, SCHEMA)
    i = a.base
    deadline = time.monotonic() + a.seconds
    print("streaming", flush=True)
    while time.monotonic() < deadline:  # bounded: the test kills us long before
        writer.write_batch(batch(i, 1000, a.name))
        i += 1000
    os._exit(3)  # never close cleanly: the stream must not commit


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr-file", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--base", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--profiles", required=True)
    ap.add_argument("--p-write", type=float, default=0.03)
    ap.add_argument("--max-rows", type=int, default=200)
    ap.add_argument("--attempts", type=int, default=40)
    ap.add_argument("--retry-for", type=float, default=60.0)
    ap.add_argument("--vanish", action="store_true")
    a = ap.parse_args()
    if a.vanish:
        vanish(a)
        return
    profiles = a.profiles.split(",")
    rnd = random.Random()
    deadline = time.monotonic() + a.seconds
    next_id = a.base
    seq = 0
    while time.monotonic() < deadline:
        n = 1 + rnd.randrange(a.max_rows)
        start, next_id = next_id, next_id + n
        rec = {"req": f"{a.name}-{seq}", "profile": rnd.choice(profiles), "mode": "write" if rnd.random() < a.p_write else "append",
               "start": start, "n": n, "ok": False, "version": "", "index": 0, "attempts": 0, "codes": [], "client": a.name}
        seq += 1
        b = batch(start, n, a.name)
        desc = flight.FlightDescriptor.for_command(json.dumps(
            {"path": rec["profile"], "mode": rec["mode"], "request_id": rec["req"], "metadata": {"client": a.name}}).encode())
        give_up = time.monotonic() + a.seconds + a.retry_for
        while rec["attempts"] < a.attempts and time.monotonic() < give_up:
            rec["attempts"] += 1
            addr = rnd.choice(addrs(a.addr_file))
            t0 = time.monotonic()
            try:
                res = put_once(addr, desc, b)
            except Exception as e:  # noqa: BLE001 - every failure is recorded and retried
                code = code_of(e)
                rec["codes"].append(code)
                if code in ("InvalidArgument", "NotFound", "PermissionDenied"):
                    rec["codes"].append(str(e)[:300])
                    break
                time.sleep(0.01 + rnd.random() * 0.04)
                continue
            if res.get("request_id") != rec["req"] or res.get("rows") != n:
                rec["codes"].append("BadAck")
                break
            rec.update(ok=True, version=res["version"], index=res["index"], lat_ms=(time.monotonic() - t0) * 1000)
            break
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
