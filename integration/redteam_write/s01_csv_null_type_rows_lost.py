"""s01: a CSV write of a one-column table whose column has Arrow type `null`
is acknowledged with its row count, but the CSV file holds blank lines, which
the reader skips: DoGet returns 0 rows. (The same table with a string column is
refused "row N has no value in any column".) Exit 1 while the bug exists."""
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
        t = pa.table({"v": pa.array([None, None, None], pa.null())})
        try:
            res = put(c, "rt/nulls", t, format="csv", mode="write")
        except pa.ArrowInvalid as e:
            print("refused (fixed):", str(e).split(". gRPC")[0])
            return 0
        back = get(c, "rt/nulls")
        lv = [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action("list-versions", b'{"path": "rt/nulls"}'))]
        print(f"acknowledged rows={res['rows']}, list-versions rows={lv[0]['versions'][0]['rows']}, DoGet rows={back.num_rows}")
        with open(os.path.join(data, "rt/nulls", res["files"][0]["path"]), "rb") as f:
            print("file bytes:", f.read())
        if back.num_rows != res["rows"]:
            print("BUG: acknowledged rows are lost on read")
            return 1
        return 0
    finally:
        stop_server(p, data)

sys.exit(main())
