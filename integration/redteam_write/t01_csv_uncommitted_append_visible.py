#!/usr/bin/env python3
"""t01 (HIGH): an uncommitted CSV append is visible to readers; after kill -9
its rows stay visible and a retry with the same request_id writes them a
second time.

Contract (protocol.md DoPut: "nothing is visible until the stream ends and the
put commits"; format.md "A commit happens when its segment is created. Nothing
else commits"; README: "puts are retried with the same request id, so a retry
never writes twice").

The script holds the commit of a CSV append open with an empty
manifest.json.write_lock (what pyrosome writes while it commits), then
  1. reads the profile while the append waits: its rows must not be served;
  2. kill -9s the server, restarts it, retries the put with the same
     request_id (as any client does after a dropped connection): the rows
     must be there once. verify must call the killed append's file an
     'orphan' (not 'unrecorded'), and sweep must remove it.
Quiver's CSV files have no footer to say who wrote them; the fix marks the
claim of a Quiver CSV append (docs/format.md, "Visibility").
Exit 1 when the bug is present, 0 when fixed.
"""
import json, os, random, shutil, socket, subprocess, sys, tempfile, threading, time
import pyarrow as pa, pyarrow.flight as fl

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))


def ports():
    if os.environ.get("PORT"):
        # The harness's port first (the restart reuses it if it is free).
        yield int(os.environ["PORT"])
    cands = list(range(19900, 20000))
    random.shuffle(cands)
    yield from cands


def start(data):
    for port in ports():
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port)); s.close()
        except OSError:
            s.close(); continue
        p = subprocess.Popen([QUIVER, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data,
                              "--lock-timeout", "30s"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if b"serving" in p.stdout.readline():
            return p, port
        p.kill(); p.wait()
    raise SystemExit("could not start quiver")


def put(port, cmd, table):
    c = fl.connect(f"grpc://127.0.0.1:{port}")
    try:
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
        w.write_table(table); w.done_writing()
        buf = r.read()
        w.close()
        return json.loads(buf.to_pybytes())
    finally:
        c.close()


def read_ids(port, path):
    c = fl.connect(f"grpc://127.0.0.1:{port}")
    try:
        return c.do_get(fl.Ticket(json.dumps({"path": path}).encode())).read_all().column("id").to_pylist()
    finally:
        c.close()


def admin(data, *args):
    r = subprocess.run([QUIVER, *args, "--data-dir", data, "--json"], capture_output=True, text=True, timeout=120)
    try:
        return json.loads(r.stdout)
    except ValueError:
        raise SystemExit(f"quiver {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")


def main():
    work = tempfile.mkdtemp(prefix="t01-")
    data = os.path.join(work, "data")
    srv, port = start(data)
    bug = False
    try:
        path = "t01/csv"
        put(port, {"path": path, "format": "csv", "mode": "write"}, pa.table({"id": [1, 2]}))
        lockf = os.path.join(data, "t01", "csv", "manifest.json.write_lock")
        open(lockf, "w").close()              # a pyrosome writer holds the lock
        errs = []

        def append():
            try:
                put(port, {"path": path, "request_id": "job-7"}, pa.table({"id": [3, 4]}))
            except Exception as e:
                errs.append(e)
        th = threading.Thread(target=append); th.start()
        time.sleep(2.0)                       # the append's data is sent; it waits for the lock
        during = read_ids(port, path)
        print("read while the append is uncommitted:", during)
        if during != [1, 2]:
            print("  BUG: rows of an uncommitted put are served")
            bug = True
        srv.kill(); srv.wait(); th.join()
        print("the put was not acknowledged:", type(errs[0]).__name__ if errs else "(acknowledged?!)")
        if not errs:
            bug = True
        os.remove(lockf)                      # the pyrosome writer finished
        srv, port = start(data)
        after_restart = read_ids(port, path)
        print("read after kill -9 and restart:", after_restart)
        if after_restart != [1, 2]:
            print("  BUG: rows of a killed put are served")
            bug = True
        res = put(port, {"path": path, "request_id": "job-7"}, pa.table({"id": [3, 4]}))
        print("retry with the same request_id:", res.get("version"), res.get("index"), "rows", res.get("rows"))
        final = read_ids(port, path)
        print("read after the retry:", final)
        if sorted(final) != [1, 2, 3, 4]:
            print("  BUG: expected [1, 2, 3, 4] (the retried put once); got", final)
            bug = True
        srv.terminate(); srv.wait(10)

        # The killed append's file is an orphan, and sweep removes it.
        rep = admin(data, "verify")
        kinds = {os.path.basename(p["path"]): p["kind"] for p in rep.get("problems") or []}
        print("verify:", kinds)
        if kinds.get("1.csv") != "orphan":
            print("  BUG: the killed append's file 1.csv is not an orphan")
            bug = True
        sw = admin(data, "sweep", "--older-than", "0s")
        print("sweep removed:", sw.get("removed"))
        if "t01/csv/v0/1.csv" not in (sw.get("removed") or []):
            print("  BUG: sweep left the killed append's file")
            bug = True
        srv, port = start(data)
        last = read_ids(port, path)
        print("read after sweep:", last)
        if sorted(last) != [1, 2, 3, 4]:
            print("  BUG: expected [1, 2, 3, 4] after sweep; got", last)
            bug = True
    finally:
        if srv.poll() is None:
            srv.terminate()
            try: srv.wait(10)
            except Exception: srv.kill(); srv.wait()
        shutil.rmtree(work, ignore_errors=True)
    print("BUG PRESENT" if bug else "OK")
    sys.exit(1 if bug else 0)


if __name__ == "__main__":
    main()
