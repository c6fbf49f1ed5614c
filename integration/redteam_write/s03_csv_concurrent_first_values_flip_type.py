"""s03: a CSV column that holds only nulls takes its type from the first append
with values. Two appends sent at once to such a column, one of int64 [5] and one
of bool [true], are both acknowledged and the column is then inferred as string:
the acknowledged int reads back as "5" and the bool as "true", a result no serial
order gives (one of them would be refused or cast to the other's type).
Exit 1 while the bug exists."""
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
import threading

def main():
    p, data, port = start_server()
    bad = 0
    try:
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        for trial in range(10):
            path = f"rt/race{trial}"
            put(c, path, pa.table({"a": pa.array([None], pa.string()), "id": ["base"]}), format="csv", mode="write")
            apps = [pa.table({"a": pa.array([5]), "id": ["int"]}),
                    pa.table({"a": pa.array([True]), "id": ["bool"]})]
            clients = [fl.connect(f"grpc://127.0.0.1:{port}") for _ in apps]
            res = [None] * len(apps)
            bar = threading.Barrier(len(apps))
            def go(i):
                bar.wait()
                try:
                    put(clients[i], path, apps[i], format="csv"); res[i] = "ok"
                except Exception as e:
                    res[i] = type(e).__name__
            th = [threading.Thread(target=go, args=(i,)) for i in range(len(apps))]
            [t.start() for t in th]; [t.join() for t in th]
            back = get(c, path)
            rows = dict(zip(back.column("id").to_pylist(), back.column("a").to_pylist()))
            if res == ["ok", "ok"] and pa.types.is_string(back.schema.field("a").type):
                print(f"trial {trial}: BUG: int64 [5] and bool [true] both acknowledged; column read back as "
                      f"string: int -> {rows['int']!r}, bool -> {rows['bool']!r}")
                bad += 1
            else:
                print(f"trial {trial}: results {res}, column {back.schema.field('a').type}, {rows}")
    finally:
        stop_server(p, data)
    return 1 if bad else 0

sys.exit(main())
