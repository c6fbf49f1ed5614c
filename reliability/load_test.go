package reliability

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/client"
)

var loadProfiles = []string{"load/a", "load/b", "load/c", "load/d"}

// TestLoad: 3 servers on one data dir; Go and pyarrow clients append and
// write for the scale's duration while readers read and a poller watches
// the manifests. Then every version is read back and compared with what
// the clients were told (DESIGN.md §4.2, §4.3), and verify must be clean.
func TestLoad(t *testing.T) {
	requireStress(t)
	c := newCluster(t, 3, "--lock-timeout", "10s")
	w := newWorkload(c, loadProfiles)
	ctx, cancel := context.WithTimeout(context.Background(), sc.Duration+10*time.Minute)
	defer cancel()

	stop := make(chan struct{})
	polls, mproblems, pdone := pollManifests(c.dataDir, loadProfiles, stop)
	var readerErrs counter
	var reads atomic.Int64
	var rwg sync.WaitGroup
	for i := 0; i < 2; i++ {
		rwg.Add(1)
		go func() { defer rwg.Done(); reader(ctx, c, &reads, &readerErrs, stop) }()
	}

	t0 := time.Now()
	deadline := t0.Add(sc.Duration)
	var pys []*pyProc
	for i := 0; i < sc.PyClients; i++ {
		pys = append(pys, startPy(t, c.addrFile, fmt.Sprintf("py%d", i), int64(i+1)<<40, sc.Duration, loadProfiles, 0.03))
	}
	var wg sync.WaitGroup
	for i := 0; i < sc.Clients; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); w.worker(ctx, i, deadline) }(i)
	}
	wg.Wait()
	recs := append([]putRec(nil), w.led.recs...)
	var pyPuts, pyErrs int
	var pyLat latencies
	for _, pp := range pys {
		if err := pp.wait(); err != nil {
			t.Error(err)
		}
		for _, r := range pp.out {
			recs = append(recs, r)
			pyPuts += r.Attempts
			pyErrs += len(r.Codes)
			if r.Acked {
				pyLat.add(time.Duration(r.LatMS * float64(time.Millisecond)))
			}
		}
	}
	elapsed := time.Since(t0)
	close(stop)
	<-pdone
	rwg.Wait()

	cr := check(ctx, c.any(), loadProfiles, recs)
	vr, err := verify(ctx, c.any(), map[string]any{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	var goAcked int
	for _, r := range w.led.recs {
		if r.Acked {
			goAcked++
		}
	}
	report(t, "settings: servers=3 go_clients=%d pyarrow_clients=%d duration=%s profiles=%d p_write=0.03 rows/put=1..200",
		sc.Clients, sc.PyClients, sc.Duration, len(loadProfiles))
	report(t, "acked puts=%d (go %d, pyarrow %d) in %.1fs = %.1f puts/s; rows acked=%d read=%d (%.0f rows/s); versions=%d; gave up=%d",
		cr.ackedPuts, goAcked, cr.ackedPuts-goAcked, elapsed.Seconds(), float64(cr.ackedPuts)/elapsed.Seconds(),
		cr.ackedRows, cr.readRows, float64(cr.ackedRows)/elapsed.Seconds(), cr.versions, cr.gaveUp)
	report(t, "go put latency p50=%s p99=%s max=%s; pyarrow put latency (incl. connect) p50=%s p99=%s",
		w.lat.pct(0.5), w.lat.pct(0.99), w.lat.pct(1), pyLat.pct(0.5), pyLat.pct(0.99))
	report(t, "go put attempts=%d errors by code: %s; pyarrow attempts=%d errors=%d; manifest polls=%d; concurrent reads=%d reader errors: %s",
		w.puts.Load(), w.errs.String(), pyPuts, pyErrs, polls.Load(), reads.Load(), readerErrs.String())
	report(t, "acked rows missing=%d, in another version=%d, read twice=%d; rows never put=%d; empty versions=%d",
		cr.missingRows, cr.misplacedRows, cr.dupRows, cr.phantomRows, cr.emptyVersions)
	report(t, "verify: ok=%v checked_files=%d problems=%v", vr.OK, vr.Checked, vr.kinds())

	for _, p := range *mproblems {
		t.Errorf("manifest: %s", p)
	}
	for _, p := range cr.problems {
		t.Errorf("ledger: %s", p)
	}
	if cr.gaveUp > 0 {
		t.Errorf("%d puts were never acknowledged (no faults were injected)", cr.gaveUp)
	}
	if cr.ackedRows != cr.readRows {
		t.Errorf("rows acknowledged %d != rows readable %d", cr.ackedRows, cr.readRows)
	}
	if !vr.OK || len(vr.Problems) > 0 {
		t.Errorf("verify not clean: %+v", vr)
	}
	if n := readerErrs.String(); n != "none" {
		t.Errorf("concurrent readers failed: %s", n)
	}
}

// reader reads the latest version of random profiles until stop: every
// read must succeed and hold no id twice (no partial or doubled file).
func reader(ctx context.Context, c *cluster, reads *atomic.Int64, errs *counter, stop <-chan struct{}) {
	r := newRand()
	for i := 0; i < 1_000_000; i++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		_, cl := c.pick(r)
		p := loadProfiles[r.IntN(len(loadProfiles))]
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := readLatestOnce(cctx, cl, p)
		cancel()
		reads.Add(1)
		if err != nil && codeName(err) != "NotFound" {
			errs.inc(codeName(err) + ":" + trim(err.Error(), 120))
		}
	}
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func readLatestOnce(ctx context.Context, c *client.Client, path string) error {
	rdr, err := c.Read(ctx, client.ReadRequest{Path: path, Columns: []string{"id"}})
	if err != nil {
		return err
	}
	defer rdr.Release()
	seen := map[int64]bool{}
	for rdr.Next() {
		for _, id := range rdr.RecordBatch().Column(0).(*array.Int64).Int64Values() {
			if seen[id] {
				return fmt.Errorf("id %d twice in one read of %s", id, path)
			}
			seen[id] = true
		}
	}
	return rdr.Err()
}
