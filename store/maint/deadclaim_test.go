package maint_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// claimOf is the content of a claim made by process pid of this host, boot
// and pid namespace (start 0: its start time not recorded).
func claimOf(t *testing.T, pid int, start uint64) string {
	t.Helper()
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no pid namespace to name: %v", err)
	}
	b, _ := json.Marshal(map[string]any{"host": host, "boot": strings.TrimSpace(string(boot)), "pid": pid, "start": start, "pidns": ns})
	return string(b)
}

// deadClaim is the claim of a process that has exited (a real one:
// started and waited for).
func deadClaim(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to outlive: %v", err)
	}
	return claimOf(t, cmd.Process.Pid, 1)
}

// TestSweepDeadClaims: sweep removes, at any age, the uncommitted files
// whose claim names a process that is gone (a root file and a partition's)
// — and nothing committed, though every committed file's claim is made to
// name that dead process too, with no age at all (red team round 42's
// h03: shared small-append files, appends, partitions, compaction).
func TestSweepDeadClaims(t *testing.T) {
	s, dir := newStore(t)
	auditFixture(t, s)
	orders, parts := []string{"sales", "orders"}, []string{"sales", "parts"}
	if _, err := s.Compact(context.Background(), orders, store.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	put(t, s, store.ModeAppend, orders, ids(6), store.PutOptions{})
	dead := deadClaim(t)
	// Every claim in the data dir now names the dead process.
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(d.Name(), ".parquet.claim") {
			err = os.WriteFile(p, []byte(dead), 0o644)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two uncommitted files of a killed put, young: copies of committed
	// files at an index no record lists, its claim naming the dead
	// process; and one whose claim names a live process (this one).
	ov := filepath.Join(dir, "sales", "orders", latestDir(t, dir, orders))
	pv := filepath.Join(dir, "sales", "parts", "v0")
	copyFile(t, filepath.Join(ov, firstParquet(t, ov)), filepath.Join(ov, "90.parquet"))
	writeFile(t, filepath.Join(ov, ".90.parquet.claim"), dead, 0)
	copyFile(t, filepath.Join(pv, "region=eu", "0.parquet"), filepath.Join(pv, "region=eu", "91.parquet"))
	writeFile(t, filepath.Join(pv, ".91.parquet.claim"), dead, 0)
	copyFile(t, filepath.Join(ov, firstParquet(t, ov)), filepath.Join(ov, "92.parquet"))
	writeFile(t, filepath.Join(ov, ".92.parquet.claim"), claimOf(t, os.Getpid(), 0), 0)
	wantOrders, wantParts := readIDs(t, s, orders, -1), readIDs(t, s, parts, -1)
	before := hashTree(t, dir)

	rep, err := maint.Sweep(context.Background(), s, maint.DefaultStaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Removed)
	want := []string{
		filepath.ToSlash(filepath.Join("sales", "orders", latestDir(t, dir, orders), "90.parquet")),
		"sales/parts/v0/region=eu/91.parquet",
	}
	slices.Sort(want)
	if !slices.Equal(rep.Removed, want) {
		t.Fatalf("removed %v, want %v", rep.Removed, want)
	}
	after := hashTree(t, dir)
	for p, h := range before {
		if after[p] != h && !slices.Contains(want, p) {
			t.Errorf("%s changed or went", p)
		}
	}
	if got := readIDs(t, s, orders, -1); !slices.Equal(got, wantOrders) {
		t.Errorf("orders %v, want %v", got, wantOrders)
	}
	if got := readIDs(t, s, parts, -1); !slices.Equal(got, wantParts) {
		t.Errorf("parts %v, want %v", got, wantParts)
	}
}

func latestDir(t *testing.T, dir string, keys []string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{dir}, append(keys, "manifest.json")...)...))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Latest string `json:"latest_data_dir"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Latest == "" {
		t.Fatalf("manifest %q: %v", b, err)
	}
	return m.Latest
}

func firstParquet(t *testing.T, vdir string) string {
	t.Helper()
	entries, err := os.ReadDir(vdir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".parquet") {
			return e.Name()
		}
	}
	t.Fatalf("no data file in %s", vdir)
	return ""
}
