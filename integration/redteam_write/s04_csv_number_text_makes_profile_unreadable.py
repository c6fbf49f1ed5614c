"""s04: a CSV put of a string column whose values are "1e400", "-1e400", "-nan"
or "+nan" is acknowledged (the CSV inference takes them for numbers), but the
reader then fails to parse them: every read of the version fails DATA_LOSS
"committed data lost or altered", taking the earlier acknowledged rows with it.
Shown as an append to a column that held only nulls, and as a fresh write.
Exit 1 while any such put makes the profile unreadable."""
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

def main():
    p, data, port = start_server()
    bad = 0
    try:
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        for i, v in enumerate(["1e400", "-1e400", "-nan", "+nan"]):
            path = f"rt/app{i}"
            put(c, path, pa.table({"a": pa.array([None], pa.string()), "id": ["earlier row"]}), format="csv", mode="write")
            for step, (mode, t) in enumerate([("append", pa.table({"a": [v], "id": ["new row"]}))]):
                try:
                    put(c, path, t, format="csv", mode=mode)
                except pa.ArrowInvalid:
                    print(f"append {v!r}: refused (ok)"); continue
                try:
                    back = get(c, path)
                    print(f"append {v!r}: acknowledged, read back {back.column('a').to_pylist()}")
                except pa.ArrowException as e:
                    print(f"BUG: append {v!r} acknowledged; every read now fails: {str(e).split('. gRPC')[0]}")
                    bad += 1
            path = f"rt/write{i}"
            try:
                put(c, path, pa.table({"a": [v]}), format="csv", mode="write")
            except pa.ArrowInvalid:
                print(f"write {v!r}: refused (ok)"); continue
            try:
                back = get(c, path)
                print(f"write {v!r}: acknowledged, read back {back.column('a').to_pylist()}")
            except pa.ArrowException as e:
                print(f"BUG: write {v!r} acknowledged; every read now fails: {str(e).split('. gRPC')[0]}")
                bad += 1
    finally:
        stop_server(p, data)
    return 1 if bad else 0

sys.exit(main())
