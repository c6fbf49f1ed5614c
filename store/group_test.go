package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
)

// queueAppends starts n appends to k (append i puts ids 100i+1..100i+rows,
// request id "r<i>" for even i) while another writer (pyrosome: an empty
// lock file) holds the profile's lock, waits until all of them wait in one
// commit queue, and frees the lock. It returns each append's result.
func queueAppends(t *testing.T, s *Store, fs *lockWaitFS, dir string, k []string, n, rows int) ([]*CommitRecord, []error) {
	t.Helper()
	return queuePuts(t, s, fs, dir, k, n, func(i int) array.RecordReader {
		vals := make([]int64, rows)
		for j := range vals {
			vals[j] = int64(100*i + j + 1)
		}
		return ids(vals...)
	})
}

// queuePuts is queueAppends of the batches data(i) gives.
func queuePuts(t *testing.T, s *Store, fs *lockWaitFS, dir string, k []string, n int, data func(i int) array.RecordReader) ([]*CommitRecord, []error) {
	t.Helper()
	lock := filepath.Join(dir, filepath.Join(k...), lockName)
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, errs := make([]*CommitRecord, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rdr := data(i)
			defer rdr.Release()
			o := PutOptions{Mode: ModeAppend}
			if i%2 == 0 {
				o.RequestID = fmt.Sprintf("r%d", i)
			}
			recs[i], errs[i] = s.Put(context.Background(), k, rdr, o)
		})
	}
	<-fs.waiting
	ps := s.state(profile{keys: k, dir: strings.Join(k, "/")})
	deadline := time.Now().Add(30 * time.Second)
	for {
		waiting := ps.commit.waiting.Load()
		if waiting == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d appends wait for their commit", waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return recs, errs
}

func newLockWaitStore(t *testing.T, opts ...Option) (*Store, *lockWaitFS, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := &lockWaitFS{FS: l, waiting: make(chan struct{})}
	s, _ := newTestStore(t, append([]Option{WithFS(fs), WithLockTimeout(time.Minute)}, opts...)...)
	return s, fs, dir
}

func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.HasPrefix(d.Name(), ".") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestSmallAppendsShareAFile: appends that meet in one commit cycle are
// written to one data file by the cycle, each keeping its own record (its
// request id, rows, the file's SHA-256 and its rows' place in it). Reads,
// a fresh process's reads, replays and lineage see each append once.
func TestSmallAppendsShareAFile(t *testing.T) {
	s, fs, dir := newLockWaitStore(t)
	k := []string{"g"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	const n, rows = 8, 3
	recs, errs := queueAppends(t, s, fs, dir, k, n, rows)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// The cycle that waited for the lock took the appends that had
	// arrived when it started (at least the first), the next cycle the
	// rest: one or two files, each shared by the records of its cycle.
	slices.SortFunc(recs, func(a, b *CommitRecord) int { return int(a.Seq - b.Seq) })
	byPath := map[string][]*CommitRecord{}
	for _, r := range recs {
		if len(r.Files) != 1 || r.Rows != rows || r.Files[0].Rows != rows {
			t.Fatalf("record %d: %+v", r.Seq, r)
		}
		byPath[r.Files[0].Path] = append(byPath[r.Files[0].Path], r)
	}
	if got := parquetFiles(t, dir); len(got) != 1+len(byPath) || len(byPath) > 2 {
		t.Fatalf("data files %v for %d appends in %d files", got, n, len(byPath))
	}
	most := 0
	for _, rs := range byPath {
		most = max(most, len(rs))
		var off int64
		for _, r := range rs {
			f := r.Files[0]
			if len(rs) == 1 {
				if f.Shared() {
					t.Fatalf("record %d: %+v, a file of its own", r.Seq, f)
				}
				continue
			}
			if !f.Shared() || f.Offset != off || f.FileRows != int64(len(rs)*rows) || f.SHA256 != rs[0].Files[0].SHA256 || r.Index != rs[0].Index {
				t.Fatalf("record %d: %+v (index %d), want rows %d at %d of %d of the shared file", r.Seq, f, r.Index, rows, off, len(rs)*rows)
			}
			off += rows
		}
	}
	if most < n/2 { // two cycles at most
		t.Fatalf("at most %d appends of %d shared a file", most, n)
	}
	var want []int64
	want = append(want, 0)
	all := readIDs(t, s, k, Latest)
	for _, r := range recs {
		// Which append a record is: the ids at its place in the read.
		at := 1 + rows*int(r.Seq-recs[0].Seq)
		i := int(all[at] / 100)
		if r.RequestID != "" && r.RequestID != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d (%s) holds the rows of append %d", r.Seq, r.RequestID, i)
		}
		for j := range rows {
			want = append(want, int64(100*i+j+1))
		}
	}
	if !slices.Equal(all, want) {
		t.Fatalf("read %v, want %v", all, want)
	}
	// A process that starts now reads the same.
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := readIDs(t, s2, k, Latest); !slices.Equal(got, want) {
		t.Fatalf("a new process read %v, want %v", got, want)
	}
	_, vs, err := s2.Versions(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Files != 1+len(byPath) || vs[0].Rows != int64(1+n*rows) {
		t.Fatalf("versions %+v, want %d files and %d rows", vs, 1+len(byPath), 1+n*rows)
	}
	// A resend of an append of the group is answered with its record.
	rdr := ids(1, 2, 3)
	r, err := s2.Put(context.Background(), k, rdr, PutOptions{Mode: ModeAppend, RequestID: "r2"})
	rdr.Release()
	if err != nil || !r.Replayed || r.Seq != recs[slices.IndexFunc(recs, func(c *CommitRecord) bool { return c.RequestID == "r2" })].Seq {
		t.Fatalf("replay: %+v, %v", r, err)
	}
	if got := readIDs(t, s2, k, Latest); len(got) != len(want) {
		t.Fatalf("%d rows after the replay, want %d", len(got), len(want))
	}
}

// TestLargeAppendWritesItsOwnFile: an append over the group limit writes
// its own file as it streams; 0 turns sharing off.
func TestLargeAppendWritesItsOwnFile(t *testing.T) {
	for _, limit := range []int64{64, 0} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s, fs, dir := newLockWaitStore(t, WithGroupAppendBytes(limit))
			k := []string{"g"}
			put(t, s, ModeWrite, k, ids(0), PutOptions{})
			recs, errs := queueAppends(t, s, fs, dir, k, 4, 20)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				if f := recs[i].Files[0]; f.Shared() || f.Rows != 20 {
					t.Fatalf("append %d: %+v, want a file of its own", i, f)
				}
			}
			if got := parquetFiles(t, dir); len(got) != 5 {
				t.Fatalf("data files %v, want 5", got)
			}
			if got := readIDs(t, s, k, Latest); len(got) != 81 {
				t.Fatalf("%d rows, want 81", len(got))
			}
		})
	}
}

// TestSharedFileFailureLeavesNothing: when the shared file or the cycle's
// log segment cannot be written (a full disk), or on a local disk the
// sync of the version directory or of the segment's content fails, every
// append of the cycle fails with that error and leaves no file and no
// claim behind; the retries commit once.
func TestSharedFileFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		rule        faultfs.Rule
		relaxedOnly bool
	}{
		{faultfs.Rule{Op: faultfs.Write, Glob: "*.parquet", Err: syscall.ENOSPC}, false},
		{faultfs.Rule{Op: faultfs.Commit, Glob: "*.parquet", Err: syscall.ENOSPC}, false},
		{faultfs.Rule{Op: faultfs.CreateExclusive | faultfs.Create, Glob: "*" + segmentExt, Err: syscall.ENOSPC}, false},
		{faultfs.Rule{Op: faultfs.Sync, Glob: "v*", Err: syscall.ENOSPC}, true},
		{faultfs.Rule{Op: faultfs.Sync, Glob: "*" + segmentExt, Err: syscall.EIO}, true},
	} {
		for _, relaxed := range []bool{true, false} {
			if tc.relaxedOnly && !relaxed {
				continue
			}
			t.Run(fmt.Sprintf("%v %s/relaxed=%v", tc.rule.Op, tc.rule.Glob, relaxed), func(t *testing.T) {
				sharedFileFailureLeavesNothing(t, tc.rule, relaxed)
			})
		}
	}
}

func sharedFileFailureLeavesNothing(t *testing.T, rule faultfs.Rule, relaxed bool) {
	ff, dir := faultLocal(t, relaxed)
	fs := &lockWaitFS{FS: ff, waiting: make(chan struct{})}
	s, _ := newTestStore(t, WithFS(fs.withRelaxed()), WithLockTimeout(time.Minute))
	if fsys.IsRelaxed(s.fs) != relaxed {
		t.Fatalf("the store's storage is Relaxed: %v, want %v", !relaxed, relaxed)
	}
	k := []string{"g"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	before := hashTree(t, dir)
	ff.Add(rule)
	_, errs := queueAppends(t, s, fs, dir, k, 4, 2)
	for i, err := range errs {
		if !errors.Is(err, rule.Err) {
			t.Fatalf("append %d: %v, want %v", i, err, rule.Err)
		}
	}
	assertOnlyClaims(t, before, hashTree(t, dir), 0)
	if got := readIDs(t, s, k, Latest); !slices.Equal(got, []int64{0}) {
		t.Fatalf("read %v", got)
	}
	ff.Clear()
	fs.once, fs.waiting = sync.Once{}, make(chan struct{})
	if _, errs = queueAppends(t, s, fs, dir, k, 4, 2); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	if got := readIDs(t, s, k, Latest); len(got) != 9 {
		t.Fatalf("%d rows after the retries, want 9", len(got))
	}
}

// TestSharedFileNameTakenLeftAlone: a cycle whose shared file finds its
// name taken (another writer, ignoring claims, made the next numbered
// files) fails whole and retryable, and leaves the other writer's files
// alone; a retry commits past them (red team round 39's f01: the cycle's
// cleanup deleted them, rows readers had seen).
func TestSharedFileNameTakenLeftAlone(t *testing.T) {
	for _, dirs := range []bool{false, true} {
		t.Run(fmt.Sprintf("directories=%v", dirs), func(t *testing.T) {
			s, fs, dir := newLockWaitStore(t)
			k := []string{"g"}
			put(t, s, ModeWrite, k, ids(0), PutOptions{})
			put(t, s, ModeAppend, k, ids(1), PutOptions{}) // (the next index the store claims is 2)
			vdir := filepath.Join(dir, "g", "v0")
			planted, err := os.ReadFile(filepath.Join(vdir, "0.parquet"))
			if err != nil {
				t.Fatal(err)
			}
			for i := 2; i <= 4; i++ {
				name := filepath.Join(vdir, fmt.Sprintf("%d.parquet", i))
				if dirs {
					err = os.Mkdir(name, 0o755)
				} else {
					err = os.WriteFile(name, planted, 0o444)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			before := hashTree(t, dir)
			_, errs := queueAppends(t, s, fs, dir, k, 4, 2)
			failed := 0
			for i, err := range errs {
				switch {
				case err == nil:
				case errors.Is(err, ErrUnavailable):
					failed++
				default:
					t.Fatalf("append %d: %v, want ErrUnavailable (a retry commits it)", i, err)
				}
			}
			if failed == 0 {
				t.Fatal("every append committed over a taken name")
			}
			after := hashTree(t, dir)
			for i := 2; i <= 4; i++ {
				rel := filepath.Join("g", "v0", fmt.Sprintf("%d.parquet", i))
				if !dirs && after[rel] != before[rel] {
					t.Fatalf("%s: %q after the failed cycle, %q before", rel, after[rel], before[rel])
				}
				if fi, err := os.Stat(filepath.Join(dir, rel)); err != nil || fi.IsDir() != dirs {
					t.Fatalf("%s after the failed cycle: %v, %v", rel, fi, err)
				}
			}
			// Retried, each commits, at an index past the taken ones.
			for i := range 4 {
				var err error
				for range 5 {
					rdr := ids(int64(1000 + i))
					_, err = s.Put(context.Background(), k, rdr, PutOptions{Mode: ModeAppend, RequestID: fmt.Sprintf("retry%d", i)})
					rdr.Release()
					if !errors.Is(err, ErrUnavailable) {
						break
					}
				}
				if err != nil {
					t.Fatalf("retry %d: %v", i, err)
				}
			}
			for i := 2; i <= 4; i++ {
				if _, err := os.Stat(filepath.Join(vdir, fmt.Sprintf("%d.parquet", i))); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestBadAppendFailsAlone: an append whose rows pass the checks at their
// arrival but cannot be encoded (a timestamp[s] that overflows the
// milliseconds Parquet stores) fails alone with its own error; the other
// appends of its cycle commit (red team round 14's g01: the whole group
// was refused with the bad append's InvalidArgument).
func TestBadAppendFailsAlone(t *testing.T) {
	s, fs, dir := newLockWaitStore(t)
	k := []string{"g"}
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Second}, Nullable: true}}, nil)
	put(t, s, ModeWrite, k, fromJSON(t, sc, `[{"id": 0, "t": 0}]`), PutOptions{})
	const n, bad = 6, 3
	_, errs := queuePuts(t, s, fs, dir, k, n, func(i int) array.RecordReader {
		ts := 60 * i
		if i == bad {
			ts = 1 << 62
		}
		return fromJSON(t, sc, fmt.Sprintf(`[{"id": %d, "t": %d}]`, i, ts))
	})
	for i, err := range errs {
		switch {
		case i == bad && !errors.Is(err, ErrInvalidArgument):
			t.Fatalf("the bad append: %v, want InvalidArgument", err)
		case i != bad && err != nil:
			t.Fatalf("append %d: %v", i, err)
		}
	}
	got := readIDs(t, s, k, Latest)
	slices.Sort(got)
	if !slices.Equal(got, []int64{0, 0, 1, 2, 4, 5}) {
		t.Fatalf("read %v", got)
	}
}

// TestEmptyAppendsGetFilesOfTheirOwn: appends of no rows in one cycle are
// not written to one shared file of 0 rows, whose records could not say
// it is shared (red team round 14's g02).
func TestEmptyAppendsGetFilesOfTheirOwn(t *testing.T) {
	s, fs, dir := newLockWaitStore(t)
	k := []string{"g"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	recs, errs := queuePuts(t, s, fs, dir, k, 4, func(int) array.RecordReader { return ids() })
	paths := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if f := recs[i].Files[0]; f.Shared() || paths[f.Path] {
			t.Fatalf("append %d: %+v, want a file of its own", i, f)
		}
		paths[recs[i].Files[0].Path] = true
	}
	if got := readIDs(t, s, k, Latest); !slices.Equal(got, []int64{0}) {
		t.Fatalf("read %v", got)
	}
}
