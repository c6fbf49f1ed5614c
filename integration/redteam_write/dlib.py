"""Shared helpers for the dictionary red-team reproducers (d01_*.py … d12_*.py).

qlib.py serves the r*.py scripts with other signatures (a Server class,
put(client, path_or_cmd, table)); the d-scripts use the plain functions
below. The binary is env QUIVER, else <repo>/bin/quiver.
"""
import glob, json, os, shutil, subprocess, tempfile
import pyarrow.flight as fl

HERE = os.path.dirname(os.path.abspath(__file__))
QUIVER = os.environ.get("QUIVER", os.path.join(HERE, "..", "..", "bin", "quiver"))


def serve(*extra):
    """Start `quiver serve` on a fresh temp dir (extra: more serve flags).

    Returns (proc, temp dir, data dir, client, "127.0.0.1:port"); the server's
    stderr goes to <temp dir>/server.log. Stop it with stop_server.
    """
    d = tempfile.mkdtemp(prefix="quiver_rt_", dir="/tmp")
    data = os.path.join(d, "data")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", data, "--addr", "127.0.0.1:0", *extra],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(d, "server.log"), "w"), text=True)
    line = p.stdout.readline()
    addr = line.strip().split(" on ")[-1]
    return p, d, data, fl.connect("grpc://" + addr), addr


def start_server(*extra):
    """serve() without the address: (proc, temp dir, data dir, client)."""
    return serve(*extra)[:4]


def stop_server(p, d):
    """Terminate the server and remove its temp dir."""
    p.terminate(); p.wait(10); shutil.rmtree(d, ignore_errors=True)


def put(client, path, batches, schema, mode="write", **kw):
    """DoPut of batches with the JSON command {path, mode, **kw}; returns the decoded reply."""
    cmd = dict(path=path, mode=mode, **kw)
    w, r = client.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), schema)
    for b in batches:
        w.write_batch(b)
    w.done_writing()
    res = r.read()
    w.close()
    return json.loads(res.to_pybytes())


def get(client, path, **t):
    """DoGet of the JSON ticket {path, **t}; returns the whole table."""
    t["path"] = path
    return client.do_get(fl.Ticket(json.dumps(t).encode())).read_all()


def compact(client, path):
    """Run the `compact` action on path; returns its decoded results."""
    return [json.loads(r.body.to_pybytes())
            for r in client.do_action(fl.Action("compact", json.dumps({"path": path}).encode()))]


def latest_files(data, path):
    """The Parquet files of the profile's latest version, per its manifest.json."""
    prof = os.path.join(data, path)
    v = json.load(open(os.path.join(prof, "manifest.json")))["latest_data_dir"]
    return sorted(glob.glob(os.path.join(prof, v, "**", "*.parquet"), recursive=True))


def hwm_kb(pid):
    """Peak resident set size (VmHWM) of process pid, in KiB."""
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmHWM"):
            return int(l.split()[1])
    return 0


def report(bad):
    """Print the verdict; the exit code: 1 if bad lists bugs, else 0."""
    if bad:
        print("BUG:", "; ".join(bad)); return 1
    print("OK"); return 0
