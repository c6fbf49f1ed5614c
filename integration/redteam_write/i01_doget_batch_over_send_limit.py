#!/usr/bin/env python3
"""i01 (MEDIUM): DoGet sends messages far above --max-send-msg-size (4 MiB) when a file's
first rows are small and later rows are large. One put of 20,000 rows holding "x" followed
by 200 rows holding 100 KiB strings (one file, one row group) is read back in batches of
~20 MiB. protocol.md: "Batches are sliced so each message stays under --max-send-msg-size
(4 MiB: what a grpc-go client accepts by default)"; operations.md: "DoGet slices batches;
never an error". A client with gRPC's default 4 MiB receive limit cannot read the acknowledged
data at all (pyarrow with grpc.max_receive_message_length=4 MiB: the call is CANCELLED).
The batch size is planned from the row size measured on the first page of the file
(kept per file and set of columns), not from the rows actually decoded.
Exit 0 = bug absent, 1 = bug present."""
import os, re, sys, json, shutil, tempfile, subprocess
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))
LIMIT = 4 << 20

def main():
    d = tempfile.mkdtemp(prefix="rt16-i01")
    err = open(os.path.join(d, "..", os.path.basename(d) + ".log"), "w")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        addr = re.search(r"on (\S+)$", p.stdout.readline().strip()).group(1)
        c = fl.connect("grpc://" + addr)
        small = pa.table({"k": pa.array(range(20000)), "s": pa.array(["x"] * 20000)})
        big = pa.table({"k": pa.array(range(200)), "s": pa.array(["y" * (100 << 10)] * 200)})
        t = pa.concat_tables([small, big])
        w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "m/mix", "mode": "write"})), t.schema)
        w.write_table(t); w.done_writing(); r.read(); w.close()
        back = c.do_get(fl.Ticket(b"m/mix")).read_all()
        sizes = [b.nbytes for b in back.to_batches()]
        print("rows", back.num_rows, "equal", back.equals(t), "largest batch", max(sizes), "bytes")
        c4 = fl.FlightClient("grpc://" + addr, generic_options=[("grpc.max_receive_message_length", LIMIT)])
        try:
            n = c4.do_get(fl.Ticket(b"m/mix")).read_all().num_rows
            small_client = "read %d rows" % n; failed = False
        except BaseException as e:   # pyarrow raises KeyboardInterrupt on the CANCELLED stream
            small_client = "failed: %s %s" % (type(e).__name__, str(e)[:120]); failed = True
        print("client with a 4 MiB receive limit:", small_client)
        bug = max(sizes) > LIMIT + (64 << 10) or failed
        if bug:
            print("BUG: DoGet sent a batch above the 4 MiB send limit")
        return 1 if bug else 0
    finally:
        p.terminate(); p.wait(); shutil.rmtree(d, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
