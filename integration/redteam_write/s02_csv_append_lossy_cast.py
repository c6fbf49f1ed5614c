"""s02: an append to a CSV profile is cast to the column's inferred type with
arrow's lossy casts, not only lossless widenings: int64 2 and -1, float 0.5 and
NaN appended to a bool column are acknowledged and read back as true; the
strings "1"/"t" as true; a timestamp appended to an int64 column reads back as
its epoch seconds. The acknowledged values are altered (a Parquet profile
refuses all of these: only lossless widenings are cast). Exit 1 while any of these appends is accepted."""
import os, sys, json, socket, subprocess, tempfile, shutil, random, time
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def start_server():
    os.makedirs("/work/rtrun/rt18", exist_ok=True)
    data = tempfile.mkdtemp(prefix="data-", dir="/work/rtrun/rt18")
    ports = list(range(19800, 19900)); random.shuffle(ports)
    for port in ports:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port)); s.close()
        except OSError:
            s.close(); continue
        p = subprocess.Popen([QUIVER, "serve", "--data-dir", data, "--addr", f"127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = p.stdout.readline()
        if "serving" in line:
            return p, data, port
        p.kill(); p.wait()
    raise SystemExit("could not start quiver")

def stop_server(p, data):
    if p.poll() is None:
        p.terminate()
        try: p.wait(10)
        except Exception: p.kill()
    shutil.rmtree(data, ignore_errors=True)

def put(client, path, table, **cmd):
    cmd = dict(path=path, **cmd)
    w, r = client.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), table.schema)
    w.write_table(table)
    w.done_writing()
    res = r.read()
    w.close()
    return json.loads(res.to_pybytes())

def get(client, path):
    return client.do_get(fl.Ticket(json.dumps({"path": path}).encode())).read_all()
# --- end harness ---
import datetime

CASES = [
    ("bool",  pa.array([True, False]), pa.array([2, -1], pa.int64())),
    ("bool",  pa.array([True, False]), pa.array([0.5, float("nan")])),
    ("bool",  pa.array([True, False]), pa.array(["1", "t"])),
    ("int",   pa.array([5, 6]),        pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("s"))),
]

def main():
    p, data, port = start_server()
    bad = 0
    try:
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        for i, (kind, base, app) in enumerate(CASES):
            path = f"rt/cast{i}"
            put(c, path, pa.table({"a": base}), format="csv", mode="write")
            try:
                put(c, path, pa.table({"a": app}), format="csv")
            except pa.ArrowInvalid as e:
                print(f"{kind} column <- {app.type} {app.to_pylist()}: refused (ok)")
                continue
            back = get(c, path).column("a")
            got = back.to_pylist()[len(base):]
            print(f"BUG: {kind} column <- {app.type} {app.to_pylist()} acknowledged, reads back as {back.type} {got}")
            bad += 1
    finally:
        stop_server(p, data)
    return 1 if bad else 0

sys.exit(main())
