"""Lesser: manifest.json rewritten IN PLACE (open 'w', no rename; the profile
directory's mtime does not change). pyrosome/pyarrow then read the version
the manifest names; Quiver's DoGet, GetFlightInfo and ListFlights keep serving
the previously latest version indefinitely, while its own list-versions action
already reports the new latest (the server contradicts itself).
A corrupt manifest written in place is likewise still served from memory."""
import os, sys, json, time, shutil, socket, subprocess, tempfile
import pyarrow.flight as fl
import polars as pl
from pyrosome import SimpleIo
from pyrosome.dal import ParquetDal
QUIVER = os.environ.get("QUIVER", "quiver")
PORT = int(os.environ.get("PORT", "19240"))
D = tempfile.mkdtemp(prefix="quiver_repro_")
srv = subprocess.Popen([QUIVER, "serve", "--data-dir", D, "--addr", f"127.0.0.1:{PORT}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try: socket.create_connection(("127.0.0.1", PORT), 0.2).close(); break
    except OSError: time.sleep(0.1)
c = fl.FlightClient(f"grpc://127.0.0.1:{PORT}")
io = SimpleIo(D)
def p(*a): return os.path.join(D, *a)
def doget(path): return c.do_get(fl.Ticket(path.encode())).read_all().num_rows
def info(path): return c.get_flight_info(fl.FlightDescriptor.for_path(path)).total_records
def listing(path): return {"/".join(x.decode() for x in fi.descriptor.path): fi.total_records for fi in c.list_flights()}.get(path)
def versions(path): return json.loads(next(iter(c.do_action(fl.Action("list-versions", json.dumps({"path": path}).encode())))).body.to_pybytes())
def truth(path): return ParquetDal(D).read(*path.split("/")).collect().height
def warm(path):
    time.sleep(2.5)   # directory times now older than ~2 s: Quiver keeps what it reads
    for _ in range(2): doget(path); info(path); listing(path)
def df(n): return pl.DataFrame({"x": list(range(n))})

rc = 0
try:
    io.write(df(5), "p"); io.write(df(7), "p")          # v0: 5 rows, v1: 7 rows (latest)
    warm("p")
    with open(p("p", "manifest.json"), "w") as f:       # roll back to v0, in place
        f.write(json.dumps({"latest_data_dir": "v0"}, indent=4))
    for wait in (0, 3, 6):
        time.sleep(wait)
        got = (doget("p"), info("p"), listing("p"))
        v = versions("p")["latest"]
        print(f"+{wait}s truth={truth('p')} doget/info/list={got} list-versions latest={v}")
        if got != (5, 5, 5): rc = 1
finally:
    srv.terminate(); srv.wait(5); shutil.rmtree(D, ignore_errors=True)
print("STALE" if rc else "OK"); sys.exit(rc)
