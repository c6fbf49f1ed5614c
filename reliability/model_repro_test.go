package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// TestModelReproStaleVersionHead: a write abandoned mid-stream gives its
// reserved version number back (its directory is removed); a later write
// reuses the number with another schema. A server that looked at the
// abandoned version while it streamed must not keep its schema.
func TestModelReproStaleVersionHead(t *testing.T) {
	requireStress(t)
	for _, peek := range []string{"none", "list-versions", "readv"} {
		t.Run(peek, func(t *testing.T) {
			p := mustStart(t, t.TempDir())
			cl := mustDial(t, p.addr)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			path := "repro"
			put := func(pid int64, fam int, mode string) (map[string]any, error) {
				d := buildPut(dataSpec{pid: pid, fam: fam, rows: 3, batches: 1, seed: 1})
				defer d.release()
				meta, err := putStream(ctx, cl, cmdDesc(map[string]any{"path": path, "mode": mode}), d.schema, d.batches, false)
				var res map[string]any
				if err == nil {
					_ = jsonUnmarshal(meta, &res)
				}
				return res, err
			}
			if _, err := put(1, 1, "write"); err != nil { // v0: strs
				t.Fatal(err)
			}
			// A write of another schema (part) streams into v1 and is abandoned.
			d := buildPut(dataSpec{pid: 2, fam: famPart, rows: 3, batches: 1, seed: 1})
			defer d.release()
			sctx, scancel := context.WithCancel(ctx)
			stream, err := cl.DoPut(sctx)
			if err != nil {
				t.Fatal(err)
			}
			w := flight.NewRecordWriter(stream, ipc.WithSchema(d.schema))
			w.SetFlightDescriptor(cmdDesc(map[string]any{"path": path, "mode": "write"}))
			if err := w.Write(d.batches[0]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // v1 is reserved, its .version.json written
			switch peek {
			case "list-versions":
				vl, err := listVersions(ctx, cl, path)
				t.Logf("list-versions while v1 streams: %+v %v", vl, err)
			case "readv":
				_, _, err := readRows(ctx, cl, js(map[string]any{"path": path, "version": "v1"}), true)
				t.Logf("read v1 while it streams: %v", err)
			}
			scancel()
			_, _ = stream.Recv()
			time.Sleep(300 * time.Millisecond) // the server discards v1
			res, err := put(3, 1, "write")     // strs again
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the next write got %v", res["version"])
			if _, err := put(4, 1, "append"); err != nil {
				t.Errorf("append of the latest version's own schema after %s peeked at an abandoned write of the same version number: %v", peek, err)
			}
			rows, _, err := readRows(ctx, cl, js(map[string]any{"path": path}), true)
			if err != nil {
				t.Errorf("read latest: %v", err)
			}
			t.Logf("latest holds %d rows", len(rows))
		})
	}
}
