"""s07 (LOW): an append of the string "05" (or "-0", "00") to a CSV column that
already holds non-numeric strings ("x") is refused with 'holds "05", which a CSV
profile reads back as a number without its sign or leading zeros' although
the column is a string column for good (a file with "x" is never removed), so
the value would read back exactly. Refusal and message are both wrong.
Exit 1 while the append is refused."""
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
    try:
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        path = "rt/codes"
        put(c, path, pa.table({"code": ["x"]}), format="csv", mode="write")
        try:
            put(c, path, pa.table({"code": ["05"]}), format="csv")
        except pa.ArrowInvalid as e:
            print("BUG: refused:", str(e).split(". gRPC")[0])
            return 1
        back = get(c, path).column("code").to_pylist()
        print("read back", back)
        return 0 if back == ["x", "05"] else 1
    finally:
        stop_server(p, data)

sys.exit(main())
