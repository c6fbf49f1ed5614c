"""Lesser: a change made by pyrosome's own API (append / write, i.e. temp file
+ rename) followed by setting the directory's mtime back to what it was
(touch -d / touch -r / os.utime; what rsync -t, cp -a or tar x do when they
copy a directory's times). Quiver keeps serving the pre-change data
indefinitely (it keys only on the mtime; the directory's ctime and the new
entries do change). Also: after the write case list-versions reports v1 as
latest while DoGet serves v0."""
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
    io.write(df(5), "a"); io.write(df(5), "w")
    warm("a"); warm("w")
    st = os.stat(p("a", "v0")); io.append(df(3), "a")
    os.utime(p("a", "v0"), ns=(st.st_atime_ns, st.st_mtime_ns))
    st = os.stat(p("w")); io.write(df(2), "w")
    os.utime(p("w"), ns=(st.st_atime_ns, st.st_mtime_ns))
    for wait in (0, 3):
        time.sleep(wait)
        ga = (doget("a"), info("a"), listing("a")); gw = (doget("w"), info("w"), listing("w"))
        print(f"+{wait}s append: truth={truth('a')} doget/info/list={ga} | write: truth={truth('w')} doget/info/list={gw} list-versions latest={versions('w')['latest']}")
        if ga != (8, 8, 8) or gw != (2, 2, 2): rc = 1
finally:
    srv.terminate(); srv.wait(5); shutil.rmtree(D, ignore_errors=True)
print("STALE" if rc else "OK"); sys.exit(rc)
