"""s06: a Parquet put of a fixed_size_list column of size 0 holding a non-null
entry ([] — also inside a struct or a list) is acknowledged, but the file
Quiver writes cannot be read: every DoGet of the version then fails DATA_LOSS
"expected all lists to be of size=0, but index 0 had size=1" (pyarrow reading
the file fails the same way), taking the version's earlier acknowledged rows
with it. Exit 1 while the bug exists."""
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
import glob
import pyarrow.parquet as pq

def main():
    p, data, port = start_server()
    try:
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        typ = pa.list_(pa.int32(), 0)
        path = "rt/fsl0"
        try:
            put(c, path, pa.table({"v": pa.array([None], typ), "id": [1]}), mode="write")
        except pa.ArrowInvalid as e:
            print("size-0 fixed_size_list refused (acceptable):", str(e).split(". gRPC")[0])
            return 0
        print("before: DoGet rows =", get(c, path).num_rows)
        try:
            put(c, path, pa.table({"v": pa.array([[]], typ), "id": [2]}))
        except pa.ArrowInvalid as e:
            print("append refused (acceptable):", str(e).split(". gRPC")[0])
            return 0
        try:
            back = get(c, path)
        except pa.ArrowException as e:
            print("BUG: append acknowledged; every read of the version now fails:", str(e).split(". gRPC")[0])
            for f in sorted(glob.glob(os.path.join(data, path, "v0", "*.parquet"))):
                try:
                    pq.read_table(f)
                except Exception as e2:
                    print("  pyarrow reading", os.path.basename(f), "fails:", str(e2)[:100])
            return 1
        want = [None, []]
        if back.column("v").to_pylist() != want:
            print("BUG: read back", back.column("v").to_pylist(), "want", want)
            return 1
        print("ok:", back.column("v").to_pylist())
        return 0
    finally:
        stop_server(p, data)

sys.exit(main())
