package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiverdb/quiver/client"
)

// A server sweeps once at start: a temp file a killed writer left behind
// long ago is removed, a fresh one and every committed file are kept.
func TestServeSweepsAtStart(t *testing.T) {
	s1 := startServer(t)
	rec := batch(0, 3)
	defer rec.Release()
	mustPut(t, s1.client, "swept/p", client.PutOptions{}, rec)
	vdir := filepath.Join(s1.dataDir, "swept", "p", "v0")
	stale := filepath.Join(vdir, ".deadbeef.parquet.tmp")
	fresh := filepath.Join(vdir, ".cafe.parquet.tmp")
	for _, f := range []string{stale, fresh} {
		if err := os.WriteFile(f, []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	// A second server on the same data dir sweeps it at start.
	s2 := startServer(t, "--data-dir", s1.dataDir)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(stale); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stale temp file was not swept at start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a fresh temp file was swept: %v", err)
	}
	if got := ints(t, mustGet(t, s2.client, "swept/p"), "id"); len(got) != 3 {
		t.Fatalf("committed rows after the sweep: %v", got)
	}
}

// A server sweeps again every --sweep-every: a stale temp left after the
// start-up sweep is removed by a later one (before, only a restart or an
// operator's sweep removed it, and a killed put's uncommitted file stayed
// visible to readers of the directory as long as the server ran).
func TestServeSweepsPeriodically(t *testing.T) {
	s := startServer(t, "--sweep-every", "200ms")
	rec := batch(0, 3)
	defer rec.Release()
	mustPut(t, s.client, "swept/again", client.PutOptions{}, rec)
	vdir := filepath.Join(s.dataDir, "swept", "again", "v0")
	old := time.Now().Add(-2 * time.Hour)
	plantAndWait := func(name string) {
		t.Helper()
		f := filepath.Join(vdir, name)
		if err := os.WriteFile(f, []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(f); os.IsNotExist(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stale temp %s was not swept", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The first may go to the start-up sweep; the second, planted after
	// the first was removed (a sweep removes a version's temps in one
	// pass), only to a later one.
	plantAndWait(".deadbeef.parquet.tmp")
	plantAndWait(".feedface.parquet.tmp")
	if got := ints(t, mustGet(t, s.client, "swept/again"), "id"); len(got) != 3 {
		t.Fatalf("committed rows after the sweeps: %v", got)
	}
}
