package reliability

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/internal/s3test"
)

var killProfiles = []string{"kill/a", "kill/b", "kill/c"}

// TestFaultKill: SIGKILL a random server mid-put, again and again, while
// Go and pyarrow clients keep putting and retry each put (same request_id)
// on whichever server answers. A killed server is replaced at once (same
// data dir, new port). Afterwards every acknowledged row is readable exactly
// once, nothing was read twice, verify reports only sweepable leftovers, and
// after a sweep it is clean; every server still works.
func TestFaultKill(t *testing.T) {
	requireStress(t)
	faultKill(t, newCluster(t, 3, "--lock-timeout", "2s"), killProfiles, sc.Kills)
}

// TestLoadS3: the same on one S3 bucket (versitygw, internal/s3test):
// three servers share the bucket, Go and pyarrow clients put through any
// of them while servers are SIGKILLed and replaced; every acknowledged
// row is readable exactly once, verify is clean after a sweep.
func TestLoadS3(t *testing.T) {
	requireStress(t)
	st := quivertest.S3(t, s3test.Start(t))
	faultKill(t, newClusterOn(t, st, 3, "--lock-timeout", "2s"), []string{"s3/a", "s3/b", "s3/c"}, sc.Kills)
}

// faultKill runs the kill test on cluster c (three servers) over
// profiles with kills SIGKILLs.
func faultKill(t *testing.T, c *cluster, killProfiles []string, kills int) {
	w := newWorkload(c, killProfiles)
	w.pWrite = 0.05
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	stop := make(chan struct{})
	polls, mproblems, pdone := pollManifests(c.dataDir, killProfiles, stop)
	far := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	for i := 0; i < sc.KillClients; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); w.worker(ctx, i, far) }(i)
	}
	py := startPy(t, c.addrFile, "pykill", 1<<40, time.Duration(kills)*300*time.Millisecond, killProfiles, 0.05)

	// The killer.
	r := newRand()
	t0 := time.Now()
	var midPut, inflightAtKill int64
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(30+r.IntN(220)) * time.Millisecond)
		victim := r.IntN(3)
		for try := 0; try < 20; try++ { // prefer a server with puts in flight
			c.mu.Lock()
			n := c.inflight[victim].Load()
			c.mu.Unlock()
			if n > 0 {
				break
			}
			victim = r.IntN(3)
			time.Sleep(2 * time.Millisecond)
		}
		n, err := c.killAndRestart(victim)
		if err != nil {
			t.Fatalf("restart after kill %d: %v", k, err)
		}
		if n > 0 {
			midPut++
			inflightAtKill += n
		}
	}
	killPhase := time.Since(t0)
	w.stop.Store(true)
	wg.Wait()
	recs := append([]putRec(nil), w.led.recs...)
	if err := py.wait(); err != nil {
		t.Error(err)
	}
	recs = append(recs, py.out...)
	close(stop)
	<-pdone

	cr := check(ctx, c.any(), killProfiles, recs)
	vr, err := verify(ctx, c.any(), map[string]any{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	// Sweep everything older than 0 s, then verify again.
	sw, err := action(ctx, c.any(), "sweep", map[string]any{"older_than_s": 0})
	if err != nil {
		t.Errorf("sweep: %v", err)
	}
	// and break the manifest locks killed servers left (only a dead
	// owner's lock is broken).
	for _, p := range killProfiles {
		_, _ = action(ctx, c.any(), "break-lock", map[string]any{"path": p})
	}
	vr2, err := verify(ctx, c.any(), map[string]any{})
	if err != nil {
		t.Fatalf("verify after sweep: %v", err)
	}
	var attempts, retried int
	for _, rc := range recs {
		attempts += rc.Attempts
		if rc.Attempts > 1 {
			retried++
		}
	}
	report(t, "settings: storage=%s servers=3 kills=%d go_clients=%d pyarrow_clients=1 lock_timeout=2s; kill phase %.1fs", c.st.Name, kills, sc.KillClients, killPhase.Seconds())
	report(t, "kills with puts in flight on the victim=%d (in-flight puts hit: %d); manifest locks broken by clients=%d",
		midPut, inflightAtKill, w.breaks.Load())
	report(t, "logical puts=%d acked=%d gave up=%d; attempts=%d, puts retried=%d; rows acked=%d read=%d; unacked rows visible=%d; versions=%d",
		len(recs), cr.ackedPuts, cr.gaveUp, attempts, retried, cr.ackedRows, cr.readRows, cr.unackedVisibleRows, cr.versions)
	report(t, "duplicated rows=%d in %d puts (rows of a put read more than once); acked rows missing=%d, in another version=%d; rows never put=%d; empty versions (abandoned writes)=%d",
		cr.dupRows, cr.dupPuts, cr.missingRows, cr.misplacedRows, cr.phantomRows, cr.emptyVersions)
	report(t, "go errors by code: %s; go put p50=%s p99=%s; manifest polls=%d", w.errs.String(), w.lat.pct(0.5), w.lat.pct(0.99), polls.Load())
	report(t, "verify before sweep: ok=%v files=%d problems=%v; sweep removed %d entries; verify after sweep + break-lock: ok=%v problems=%v",
		vr.OK, vr.Checked, vr.kinds(), sweepCount(sw), vr2.OK, vr2.kinds())

	for _, p := range *mproblems {
		t.Errorf("manifest: %s", p)
	}
	for _, p := range cr.problems {
		t.Errorf("ledger: %s", p)
	}
	if cr.gaveUp > 0 {
		var codes []string
		for _, rc := range recs {
			if !rc.Acked && len(codes) < 5 {
				codes = append(codes, fmt.Sprintf("%s: %v", rc.Req, rc.Codes))
			}
		}
		t.Errorf("%d puts never acknowledged, e.g. %v", cr.gaveUp, codes)
	}
	sweepable := map[string]bool{"stale_temp": true, "orphan": true, "stale_lock": true}
	for _, p := range vr.Problems {
		if !sweepable[p.Kind] {
			t.Errorf("verify after kills: %s %s: %s", p.Kind, p.Path, p.Detail)
		}
	}
	if !vr2.OK {
		kinds := vr2.kinds()
		keys := make([]string, 0, len(kinds))
		for k := range kinds {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Errorf("verify after sweep not clean: %v (first: %+v)", keys, vr2.Problems[0])
	}
	// The service keeps working: a put and a read on every server.
	c.mu.Lock()
	clients := append(c.clients[:0:0], c.clients...)
	c.mu.Unlock()
	for i, cl := range clients {
		b := rowsBatch(int64(1)<<45+int64(i)*10, 10, "after")
		_, err := put(ctx, cl, "kill/after", client.PutOptions{}, rowSchema, b)
		b.Release()
		if err != nil {
			t.Errorf("server %d after the kills: put: %v", i, err)
		}
		if err := readLatestOnce(ctx, cl, "kill/after"); err != nil {
			t.Errorf("server %d after the kills: read: %v", i, err)
		}
	}
}

func sweepCount(res [][]byte) int {
	if len(res) != 1 {
		return -1
	}
	var s struct {
		Removed []string `json:"removed"`
	}
	if err := jsonUnmarshal(res[0], &s); err != nil {
		return -1
	}
	return len(s.Removed)
}
