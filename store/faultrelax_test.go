package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
	"github.com/quiverdb/quiver/store/maint"
)

// Where a put stands after a fault (TestRelaxedDiskFull).
type faultOutcome int

const (
	// refused: the fault came before the commit point; the put fails
	// with the error and leaves nothing.
	refused faultOutcome = iota
	// acked: it came after the commit point and concerns hints (the log
	// head, the lock's release): the put is acknowledged.
	acked
	// unsure: the commit is visible but could not be made durable: the
	// put fails with ErrUnavailable and the error, its rows are there,
	// and its retry is answered from the commit.
	unsure
)

// TestRelaxedDiskFull fails, one at a time, the calls a put makes only on
// storage with relaxed durability (fsys.Relaxed: local disks), with ENOSPC
// and with EIO: the syncs of the directories its files and claims were
// created in, the segment's content sync, its claim marker, the log
// head's ReplaceSync, the lock's DeleteSync, the syncs after the commit.
// A fault before the commit point refuses the put with the error, and
// nothing it wrote stays; one after it leaves the put acknowledged, or
// refused as unsure (faultOutcome). Either way the next put succeeds at
// once, and Verify is clean after Sweep.
func TestRelaxedDiskFull(t *testing.T) {
	both := []store.Mode{store.ModeAppend, store.ModeWrite}
	cases := []struct {
		name    string
		rule    faultfs.Rule
		modes   []store.Mode
		outcome faultOutcome
	}{
		{"version dir sync", faultfs.Rule{Op: faultfs.Sync, Glob: "v*"}, both, refused},
		{"segment create", faultfs.Rule{Op: faultfs.Create, Glob: "*.ndjson"}, both, refused},
		{"segment write", faultfs.Rule{Op: faultfs.Write, Glob: "*.ndjson"}, both, refused},
		{"segment content sync", faultfs.Rule{Op: faultfs.Sync, Glob: "*.ndjson"}, both, refused},
		{"segment commit", faultfs.Rule{Op: faultfs.Commit, Glob: "*.ndjson"}, both, refused},
		{"claim marker", faultfs.Rule{Op: faultfs.CreateExclusive, Glob: "*.claim"}, []store.Mode{store.ModeAppend}, refused},
		{"data file commit", faultfs.Rule{Op: faultfs.Commit, Glob: "*.parquet"}, both, refused},
		{"log dir sync", faultfs.Rule{Op: faultfs.Sync, Glob: ".log"}, both, unsure},
		{"head ReplaceSync", faultfs.Rule{Op: faultfs.Replace, Glob: "HEAD"}, both, acked},
		{"lock DeleteSync", faultfs.Rule{Op: faultfs.Delete, Glob: "manifest.json.write_lock"}, both, acked},
		{"profile dir sync after the release", faultfs.Rule{Op: faultfs.Sync, Glob: "f"}, both, acked},
	}
	for _, tc := range cases {
		for _, mode := range tc.modes {
			for _, injected := range []error{syscall.ENOSPC, syscall.EIO} {
				t.Run(tc.name+"/"+string(mode)+"/"+injected.Error(), func(t *testing.T) {
					rule := tc.rule
					rule.Err = injected
					relaxedDiskFull(t, rule, mode, tc.outcome)
				})
			}
		}
	}
}

// relaxedDiskFull is one case of TestRelaxedDiskFull.
func relaxedDiskFull(t *testing.T, rule faultfs.Rule, mode store.Mode, outcome faultOutcome) {
	ctx := t.Context()
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ff := faultfs.New(l)
	if !fsys.IsRelaxed(ff) {
		t.Fatal("faultfs over a local directory is not Relaxed")
	}
	s := openOn(t, ff, store.WithLockTimeout(3*time.Second))
	k := []string{"f"}
	mustPutIDs(t, s, store.ModeWrite, k, 1)
	before := treeOf(t, dir)
	ff.Add(rule)
	_, err = putIDs(ctx, s, mode, k, store.PutOptions{RequestID: "x"}, 2)
	// The profile directory's sync follows the answer (the release of
	// an idle profile's lock is made durable after it).
	for deadline := time.Now().Add(5 * time.Second); ff.Injected(faultfs.All) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	fired := ff.Injected(faultfs.All)
	ff.Clear()
	if fired == 0 {
		t.Fatalf("the fault never fired (put: %v)", err)
	}
	want := []int64{1, 2}
	if mode == store.ModeWrite {
		want = []int64{2}
	}
	switch outcome {
	case acked:
		if err != nil {
			t.Fatalf("put with a fault after its commit: %v, want it acknowledged", err)
		}
		if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
	case refused, unsure:
		if !errors.Is(err, injected(rule)) {
			t.Fatalf("put: %v, want %v", err, rule.Err)
		}
		if strings.Contains(err.Error(), dir) {
			t.Errorf("the error shows the server path: %v", err)
		}
		if outcome == unsure {
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("put: %v, want ErrUnavailable", err)
			}
			if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, want) {
				t.Fatalf("rows %v of a visible commit, want %v", got, want)
			}
		} else {
			if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, []int64{1}) {
				t.Errorf("rows %v after a refused put, want [1]", got)
			}
			if diff := diffTrees(before, treeOf(t, dir)); diff != "" {
				t.Errorf("a refused put left: %s", diff)
			}
		}
		// Retried with its request id, it commits once.
		c, err := putIDs(ctx, s, mode, k, store.PutOptions{RequestID: "x"}, 2)
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		if c.Replayed != (outcome == unsure) {
			t.Errorf("retry replayed %v, want %v", c.Replayed, outcome == unsure)
		}
		if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, want) {
			t.Fatalf("rows %v after the retry, want %v", got, want)
		}
	}
	// The next put succeeds at once (no lock, claim or stale view is in
	// its way).
	start := time.Now()
	if _, err := putIDs(ctx, s, store.ModeAppend, k, store.PutOptions{}, 3); err != nil {
		t.Fatalf("the next put: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the next put took %v", d)
	}
	if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, append(want, 3)) {
		t.Fatalf("rows %v, want %v", got, append(want, 3))
	}
	if _, err := maint.Sweep(ctx, s, 0); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	verifyOK(t, s, maint.VerifyOptions{})
}

// injected is the error rule injects.
func injected(rule faultfs.Rule) error { return rule.Err }

// treeOf is every file under dir (relative name → SHA-256 of its
// content; directories as "dir").
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(h[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// diffTrees describes what changed from before to after ("" if nothing).
// The log head is a hint that may lag or lead: it is left out.
func diffTrees(before, after map[string]string) string {
	var d []string
	for name, h := range after {
		if filepath.Base(name) == "HEAD" {
			continue
		}
		if b, ok := before[name]; !ok {
			d = append(d, "+"+name)
		} else if b != h {
			d = append(d, "~"+name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok && filepath.Base(name) != "HEAD" {
			d = append(d, "-"+name)
		}
	}
	slices.Sort(d)
	return strings.Join(d, " ")
}
