package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// readIDs reads the id column of a profile's latest (or given) version.
func readIDs(t *testing.T, s *Store, keys []string, version int) []int64 {
	t.Helper()
	rdr, err := s.Read(context.Background(), keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: version}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		col := rdr.RecordBatch().Column(0).(*array.Int64)
		out = append(out, col.Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConcurrentFirstAppendsConverge: clients appending to a profile that
// does not exist yet converge on one version; no acknowledged row is lost
// (trust issue, item 1: 16 clients lost 1,300–2,000 of 16,000 rows).
func TestConcurrentFirstAppendsConverge(t *testing.T) {
	s, _ := newTestStore(t)
	const clients, puts = 16, 5
	k := []string{"fresh", "profile"}
	var wg sync.WaitGroup
	errs := make(chan error, clients*puts)
	versions := make(chan string, clients*puts)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range puts {
				rdr := ids(int64(c*1000 + i))
				r, err := s.Append(context.Background(), k, rdr, PutOptions{})
				rdr.Release()
				if err != nil {
					errs <- err
					return
				}
				versions <- r.Version
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(versions)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for v := range versions {
		seen[v] = true
	}
	if len(seen) != 1 {
		t.Fatalf("acknowledged appends landed in %d versions: %v", len(seen), seen)
	}
	got := readIDs(t, s, k, Latest)
	if len(got) != clients*puts {
		t.Fatalf("read %d rows, want %d", len(got), clients*puts)
	}
	_, vers, err := s.Versions(context.Background(), k)
	if err != nil || len(vers) != 1 {
		t.Fatalf("versions %v %v", vers, err)
	}
}

// TestLinearizableCommitPoint: 8 appenders race 2 writers. For every write
// W and append A acknowledged after W, version(A) ≥ version(W); every
// acknowledged append's rows are in the version its result names.
func TestLinearizableCommitPoint(t *testing.T) {
	s, _ := newTestStore(t)
	k := []string{"lin"}
	put(t, s, ModeWrite, k, ids(-1), PutOptions{})
	type op struct {
		write      bool
		id         int64
		version    int
		start, end time.Time
	}
	var mu sync.Mutex
	var ops []op
	var wg sync.WaitGroup
	run := func(write bool, base int64, n int) {
		defer wg.Done()
		for i := range n {
			id := base + int64(i)
			st := time.Now()
			rdr := ids(id)
			var r *CommitRecord
			var err error
			if write {
				r, err = s.Write(context.Background(), k, rdr, PutOptions{})
			} else {
				r, err = s.Append(context.Background(), k, rdr, PutOptions{})
			}
			rdr.Release()
			if err != nil {
				t.Error(err)
				return
			}
			v, _ := ParseVersion(r.Version)
			mu.Lock()
			ops = append(ops, op{write, id, v, st, time.Now()})
			mu.Unlock()
		}
	}
	for a := range 8 {
		wg.Add(1)
		go run(false, int64(1000*(a+1)), 30)
	}
	for w := range 2 {
		wg.Add(1)
		go run(true, int64(100000*(w+1)), 6)
	}
	wg.Wait()
	for _, w := range ops {
		if !w.write {
			continue
		}
		for _, a := range ops {
			if !a.write && a.start.After(w.end) && a.version < w.version {
				t.Errorf("append %d started after write %d was acknowledged (v%d) but landed in v%d", a.id, w.id, w.version, a.version)
			}
		}
	}
	for _, a := range ops {
		if a.write {
			continue
		}
		found := false
		for _, id := range readIDs(t, s, k, a.version) {
			if id == a.id {
				if found {
					t.Errorf("append %d twice in v%d", a.id, a.version)
				}
				found = true
			}
		}
		if !found {
			t.Errorf("append %d not in v%d, which its result names", a.id, a.version)
		}
	}
}

// TestNestedProfilesRefused: no profile above or below another, including
// racing creations (trust issue, item 2).
func TestNestedProfilesRefused(t *testing.T) {
	s, _ := newTestStore(t)
	put(t, s, ModeWrite, []string{"a", "b"}, ids(1), PutOptions{})
	for _, keys := range [][]string{{"a"}, {"a", "b", "c"}} {
		rdr := ids(2)
		_, err := s.Write(context.Background(), keys, rdr, PutOptions{})
		rdr.Release()
		if !errors.Is(err, ErrNestedProfile) {
			t.Errorf("%v: got %v, want ErrNestedProfile", keys, err)
		}
	}
	for i := range 20 {
		parent := []string{fmt.Sprintf("race%d", i)}
		child := []string{parent[0], "child"}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, keys := range [][]string{parent, child} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rdr := ids(1)
				defer rdr.Release()
				_, errs[j] = s.Append(context.Background(), keys, rdr, PutOptions{})
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else if !errors.Is(err, ErrNestedProfile) {
				t.Fatalf("race %d: %v", i, err)
			}
		}
		if ok != 1 {
			t.Fatalf("race %d: %d of parent and child were created (%v)", i, ok, errs)
		}
	}
}

// TestReservedKeysRefused: keys that collide with the layout's own names
// are refused and change nothing on disk.
func TestReservedKeysRefused(t *testing.T) {
	s, dir := newTestStore(t)
	put(t, s, ModeWrite, []string{"events"}, ids(1), PutOptions{})
	before := tree(t, dir)
	for _, k := range []string{"v0", "events/v1", "V7", "manifest.json", "a/manifest.json.write_lock", ".requests", ".log", "3.parquet", "x/.0.parquet.claim", "a/.1.commit.json", ".x.tmp"} {
		rdr := ids(1)
		_, err := s.Append(context.Background(), []string{k}, rdr, PutOptions{})
		rdr.Release()
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%q: got %v, want ErrInvalidKey", k, err)
		}
	}
	if after := tree(t, dir); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Fatalf("refused puts changed the data dir:\n%v\n%v", before, after)
	}
}

// TestRequestIDOnce: a retried put with the same request id commits once,
// also when the retries race.
func TestRequestIDOnce(t *testing.T) {
	s, _ := newTestStore(t)
	k := []string{"idem"}
	var wg sync.WaitGroup
	recs := make([]*CommitRecord, 8)
	for i := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdr := ids(42)
			defer rdr.Release()
			r, err := s.Append(context.Background(), k, rdr, PutOptions{RequestID: "job-1"})
			if err != nil {
				t.Error(err)
			}
			recs[i] = r
		}()
	}
	wg.Wait()
	if got := readIDs(t, s, k, Latest); len(got) != 1 {
		t.Fatalf("rows %v, want one", got)
	}
	for _, r := range recs {
		if r == nil || r.Seq != recs[0].Seq {
			t.Fatalf("results differ: %+v vs %+v", r, recs[0])
		}
	}
}

// TestChainAndSignatures: records chain by SHA-256 across versions and
// verify with the signing key.
func TestChainAndSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, dir := newTestStore(t, WithSigningKey(priv))
	k := []string{"chain"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeAppend, k, ids(2), PutOptions{})
	put(t, s, ModeWrite, k, ids(3), PutOptions{})
	var recs []*CommitRecord
	if err := s.Lineage(context.Background(), k, func(c *CommitRecord) error { recs = append(recs, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	prev := ""
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.Prev != prev {
			t.Fatalf("record %d: seq %d prev %q, want %d %q", i, r.Seq, r.Prev, i+1, prev)
		}
		if err := r.VerifySignature(pub); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		prev = r.Hash()
	}
	// A rewritten record fails its signature.
	seg := filepath.Join(dir, "chain", ".log", segmentName(2))
	b, _ := os.ReadFile(seg)
	bad, err := parseRecord([]byte(strings.Replace(strings.TrimSpace(string(b)), `"rows":1`, `"rows":1 `, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if bad.VerifySignature(pub) == nil {
		t.Fatal("a rewritten record verified")
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if recs[0].VerifySignature(other) == nil {
		t.Fatal("verified with another key")
	}
}

// fakeProcs answers liveness questions from a table.
type fakeProcs struct {
	boot   string
	booted time.Time
	alive  map[int]uint64
	ns     string // the pid namespace ("" unknown)
	// foreignProc: /proc is another pid namespace's.
	foreignProc bool
}

func (f fakeProcs) ownProc() bool       { return !f.foreignProc }
func (f fakeProcs) pidNS() string       { return f.ns }
func (f fakeProcs) bootID() string      { return f.boot }
func (f fakeProcs) bootTime() time.Time { return f.booted }
func (f fakeProcs) startTime(pid int) (uint64, bool) {
	st, ok := f.alive[pid]
	return st, ok
}

// TestLockOwnerIdentity: a lock whose owner pid was reused by a later
// process (a restarted container's pid 1) is taken over; a live owner's is
// waited for (trust issue, item 9).
func TestLockOwnerIdentity(t *testing.T) {
	procs := fakeProcs{boot: "boot-a", alive: map[int]uint64{1: 500}}
	s, dir := newTestStore(t, WithHost("h"), WithPID(1), withProcs(procs), WithLockTimeout(200*time.Millisecond))
	k := []string{"locked"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	lock := filepath.Join(dir, "locked", lockName)
	write := func(o Owner) {
		b, _ := json.Marshal(o)
		if err := os.WriteFile(lock, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The dead server was pid 1 too, started earlier.
	write(Owner{Host: "h", Boot: "boot-a", PID: 1, Start: 100, Time: time.Now()})
	put(t, s, ModeAppend, k, ids(2), PutOptions{})
	// A live owner (same pid, same start: itself elsewhere) is waited for.
	write(Owner{Host: "h", Boot: "boot-a", PID: 1, Start: 500, Time: time.Now()})
	rdr := ids(3)
	_, err := s.Append(context.Background(), k, rdr, PutOptions{})
	rdr.Release()
	if !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("got %v, want ErrLockTimeout", err)
	}
	// Another boot: unknown, judged by age only.
	write(Owner{Host: "h", Boot: "boot-b", PID: 7, Start: 1, Time: time.Now().Add(-time.Hour)})
	put(t, s, ModeAppend, k, ids(4), PutOptions{})
	if got := readIDs(t, s, k, Latest); len(got) != 3 {
		t.Fatalf("rows %v", got)
	}
}

// TestLockFromBeforeBoot: a lock that survived a machine crash (whole, or
// empty because its content was never synced) was taken before this
// machine booted, and is taken over at once, not after the stale limit
// (TestPowerLoss found such locks in half its crash images). A lock of
// another host, or of this host's name taken since the boot (another
// machine of the same name), is still waited for.
func TestLockFromBeforeBoot(t *testing.T) {
	booted := time.Now().Add(-time.Minute)
	procs := fakeProcs{boot: "boot-b", booted: booted, alive: map[int]uint64{1: 500}}
	cases := []struct {
		name    string
		content func() []byte // nil: an empty lock
		mtime   time.Time
		stale   bool
	}{
		{"this host, the boot before", ownerJSON(Owner{Host: "h", Boot: "boot-a", PID: 1, Start: 100, Time: booted.Add(-time.Second)}), booted.Add(-time.Second), true},
		{"this host, no boot id, before", ownerJSON(Owner{Host: "h", PID: 9, Time: booted.Add(-time.Hour)}), booted.Add(-time.Hour), true},
		{"empty, written before the boot", nil, booted.Add(-time.Second), true},
		{"empty, written since the boot", nil, booted.Add(time.Second), false},
		{"this host's name, another boot, since the boot", ownerJSON(Owner{Host: "h", Boot: "boot-c", PID: 1, Start: 100, Time: booted.Add(time.Second)}), booted.Add(time.Second), false},
		{"another host, before the boot", ownerJSON(Owner{Host: "other", Boot: "boot-x", PID: 1, Time: booted.Add(-time.Second)}), booted.Add(-time.Second), false},
		{"this boot, live owner", ownerJSON(Owner{Host: "h", Boot: "boot-b", PID: 1, Start: 500, Time: booted.Add(-time.Second)}), booted.Add(-time.Second), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newTestStore(t, WithHost("h"), WithPID(1), withProcs(procs), WithLockTimeout(200*time.Millisecond), WithLockStaleAfter(24*time.Hour))
			k := []string{"locked"}
			put(t, s, ModeWrite, k, ids(1), PutOptions{})
			lock := filepath.Join(dir, "locked", lockName)
			var b []byte
			if c.content != nil {
				b = c.content()
			}
			if err := os.WriteFile(lock, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(lock, c.mtime, c.mtime); err != nil {
				t.Fatal(err)
			}
			rdr := ids(2)
			_, err := s.Append(context.Background(), k, rdr, PutOptions{})
			rdr.Release()
			switch {
			case c.stale && err != nil:
				t.Fatalf("append over a lock from before the boot: %v", err)
			case !c.stale && !errors.Is(err, ErrLockTimeout):
				t.Fatalf("append over a lock that may be held: got %v, want ErrLockTimeout", err)
			}
			if c.stale {
				if _, err := os.Stat(lock); !os.IsNotExist(err) {
					t.Fatalf("the lock taken over is still there: %v", err)
				}
			}
		})
	}
}

func ownerJSON(o Owner) func() []byte {
	return func() []byte {
		b, _ := json.Marshal(o)
		return b
	}
}

// TestManifestLagRepaired: a write committed to the log whose writer died
// before moving the manifest becomes the latest at the next commit.
func TestManifestLagRepaired(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"lag"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeWrite, k, ids(2), PutOptions{})
	// Roll the manifest back, as if the writer died before moving it.
	if err := os.WriteFile(filepath.Join(dir, "lag", manifestName), encodeManifest(0), 0o644); err != nil {
		t.Fatal(err)
	}
	r := put(t, s, ModeAppend, k, ids(3), PutOptions{})
	if r.Version != "v1" {
		t.Fatalf("append went to %s, want v1", r.Version)
	}
	if got := readIDs(t, s, k, Latest); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("rows %v", got)
	}
}

// TestCompactionCarriesRacingAppends: appends committed while a compaction
// runs are in the compacted version.
func TestCompactionCarriesRacingAppends(t *testing.T) {
	s, _ := newTestStore(t)
	k := []string{"compact"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	for i := 1; i < 20; i++ {
		put(t, s, ModeAppend, k, ids(int64(i)), PutOptions{})
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var acked []int64
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(100); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rdr := ids(i)
			_, err := s.Append(context.Background(), k, rdr, PutOptions{})
			rdr.Release()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acked = append(acked, i)
			mu.Unlock()
		}
	}()
	for range 3 {
		if _, err := s.Compact(context.Background(), k, CompactOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	got := readIDs(t, s, k, Latest)
	have := map[int64]int{}
	for _, id := range got {
		have[id]++
	}
	want := append([]int64{}, acked...)
	for i := range int64(20) {
		want = append(want, i)
	}
	for _, id := range want {
		if have[id] != 1 {
			t.Errorf("id %d read %d times", id, have[id])
		}
	}
	if len(got) != len(want) {
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
}

// TestReadsCheckRecords: a committed file that is gone, of another size or
// (with verify-reads) another content fails the read with ErrDataLoss —
// never fewer rows (trust issue, item 11).
func TestReadsCheckRecords(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"tamper"}
	put(t, s, ModeWrite, k, ids(1, 2, 3), PutOptions{})
	put(t, s, ModeAppend, k, ids(4, 5), PutOptions{})
	f1 := filepath.Join(dir, "tamper", "v0", "1.parquet")
	orig, _ := os.ReadFile(f1)
	readErr := func(s *Store) error {
		rdr, err := s.Read(context.Background(), k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
		if err != nil {
			return err
		}
		defer rdr.Release()
		for rdr.Next() {
		}
		return rdr.Err()
	}
	os.Chmod(f1, 0o644)
	if err := os.Remove(f1); err != nil {
		t.Fatal(err)
	}
	if err := readErr(s); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(f1, orig[:len(orig)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := readErr(s); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("truncated file: %v", err)
	}
	flipped := append([]byte(nil), orig...)
	flipped[len(flipped)/2] ^= 0xff
	if err := os.WriteFile(f1, flipped, 0o644); err != nil {
		t.Fatal(err)
	}
	vs, err := Open(dir, WithVerifyReads(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := readErr(vs); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("flipped byte with verify-reads: %v", err)
	}
}
