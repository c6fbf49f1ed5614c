package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
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
				meta, err := putStream(ctx, cl, path, client.PutOptions{Mode: mode}, d.schema, d.batches, false)
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
			stream, err := cl.Flight().DoPut(sctx) // raw: a stream left unfinished
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

// TestModelReproCompactionSameCycle: a compaction commits only while the
// version it compacted is the latest. Writes and compactions of one
// profile gathered into one commit cycle are all checked against the
// latest at the cycle's start, so a compaction committed after a write of
// the same cycle (a higher version) copies the old latest and hides the
// write. The commit log shows it: a compaction record whose source is not
// the latest version at its seq.
func TestModelReproCompactionSameCycle(t *testing.T) {
	requireStress(t)
	p := mustStart(t, t.TempDir())
	cl := mustDial(t, p.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	path := "race"
	var pid atomic.Int64
	write := func() error {
		n := pid.Add(1)
		d := buildPut(dataSpec{pid: n, fam: 0, rows: 2, batches: 1, seed: uint64(n)})
		defer d.release()
		_, err := putStream(ctx, cl, path, client.PutOptions{Mode: catalog.ModeWrite, RequestID: reqID(n)}, d.schema, d.batches, false)
		return err
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 40; round++ {
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if i%2 == 0 {
					_ = write()
				} else {
					_, _ = action(ctx, cl, "compact", map[string]any{"path": path})
				}
			}(i)
		}
		wg.Wait()
	}
	recs, err := action(ctx, cl, "lineage", map[string]any{"path": path})
	if err != nil {
		t.Fatal(err)
	}
	latest, stale, hidden := -1, 0, 0
	var example string
	for _, b := range recs {
		var r struct {
			Seq       int64  `json:"seq"`
			Version   string `json:"version"`
			Mode      string `json:"mode"`
			RequestID string `json:"request_id"`
			Metadata  struct {
				From string `json:"compacted_from"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		v := parseVer(r.Version)
		if r.Mode != "write" {
			continue
		}
		if r.Metadata.From != "" && parseVer(r.Metadata.From) != latest {
			stale++
			// A write committed between the source and this compaction
			// is hidden when the compaction becomes the latest.
			if v > latest && parseVer(r.Metadata.From) < latest {
				hidden++
				if example == "" {
					example = fmt.Sprintf("seq %d: %s compacted from %s while v%d was the latest", r.Seq, r.Version, r.Metadata.From, latest)
				}
			}
		}
		latest = max(latest, v)
	}
	t.Logf("%d records; compactions of a source that was not the latest: %d; of them hiding a newer version: %d", len(recs), stale, hidden)
	if stale > 0 {
		t.Errorf("%d compactions committed though their source was no longer the latest (%d made the latest a copy of an older version: %s)", stale, hidden, example)
	}
}

// TestModelReproManifestLag: a write committed (its record is in the log)
// whose server died before it moved the manifest (architecture.md, "What
// survives a crash": killed between 4 and 5) is readable by a pinned read
// and listed by list-versions, while reads of the latest and
// list-versions' latest still name the version below, until the next
// commit to the profile moves the manifest. The state is made here as the
// kill leaves it: the manifest of before the write put back.
func TestModelReproManifestLag(t *testing.T) {
	requireStress(t)
	dir := t.TempDir()
	p := mustStart(t, dir)
	cl := mustDial(t, p.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := "lag"
	write := func(pid int64) {
		d := buildPut(dataSpec{pid: pid, fam: 0, rows: 2, batches: 1, seed: 1})
		defer d.release()
		if _, err := putStream(ctx, cl, path, client.PutOptions{Mode: catalog.ModeWrite}, d.schema, d.batches, false); err != nil {
			t.Fatal(err)
		}
	}
	write(1) // v0
	man := filepath.Join(dir, path, "manifest.json")
	before, err := os.ReadFile(man)
	if err != nil {
		t.Fatal(err)
	}
	write(2) // v1
	if err := os.WriteFile(man, before, 0o644); err != nil {
		t.Fatal(err)
	}
	vl, err := listVersions(ctx, cl, path)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = readRows(ctx, cl, js(map[string]any{"path": path, "version": "v1"}), false)
	t.Logf("list-versions: latest %s, versions %+v; pinned read of v1: %v", vl.Latest, vl.Versions, err)
	if err == nil && vl.Latest != "v1" {
		t.Errorf("v1 is committed and readable, yet the latest is %s", vl.Latest)
	}
}

// TestModelReproLogReloadDuplicates: a server process reads a profile's
// commit log the first time it needs it. If that first read is cut short
// (here: the request's deadline passes while it reads the segments), the
// records read so far stay in the process's view, and the next read
// appends them all again: lineage then answers records twice and reads
// return their rows twice (found by the model test as
// request-id-committed-twice right after a restart).
func TestModelReproLogReloadDuplicates(t *testing.T) {
	requireStress(t)
	dir := t.TempDir()
	p := mustStart(t, dir)
	cl := mustDial(t, p.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const profiles, appends = 8, 120
	for i := 0; i < profiles; i++ {
		for j := 0; j < appends; j++ {
			pid := int64(i*appends + j + 1)
			d := buildPut(dataSpec{pid: pid, fam: 0, rows: 1, batches: 1, seed: 1})
			_, err := putStream(ctx, cl, fmt.Sprintf("dup/p%d", i), client.PutOptions{Mode: catalog.ModeAppend, RequestID: reqID(pid)}, d.schema, d.batches, false)
			d.release()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	p.stop(t)
	p = mustStart(t, dir) // a fresh process: no profile's log is loaded
	cl = mustDial(t, p.addr)
	dups := 0
	for i := 0; i < profiles; i++ {
		path := fmt.Sprintf("dup/p%d", i)
		// A read whose deadline passes while the log is being loaded.
		for d := 200 * time.Microsecond; d < 20*time.Millisecond; d *= 2 {
			sctx, scancel := context.WithTimeout(ctx, d)
			_, err := listVersions(sctx, cl, path)
			scancel()
			if err == nil {
				break
			}
		}
		recs, err := action(ctx, cl, "lineage", map[string]any{"path": path})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		n := 0
		for _, b := range recs {
			var r struct {
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal(b, &r)
			if seen[r.RequestID] {
				n++
			}
			seen[r.RequestID] = true
		}
		rows, _, err := readRows(ctx, cl, js(map[string]any{"path": path}), false)
		t.Logf("%s: %d records, %d of them a second time; reading the latest: %d rows (%d appended), %v", path, len(recs), n, len(rows), appends, err)
		dups += n
		if err == nil && len(rows) != appends {
			t.Errorf("%s: the latest version reads %d rows; %d were appended", path, len(rows), appends)
		}
	}
	if dups > 0 {
		t.Errorf("lineage answered %d records twice after a first load of the log was cut short", dups)
	}
}
