package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/crashfs"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
	"github.com/quiverdb/quiver/store/maint"
)

// TestCSVUncommittedAppendInvisible (red team round 19, t01): a CSV file
// has no footer to say Quiver wrote it, so an append waiting for its
// commit, or killed before it, left a numbered root file no record lists
// that readers took for pyrosome's and served: a dirty read, rows visible
// for good after the kill, and written twice by the client's retry with
// its request id. Quiver's CSV claims now carry a mark, durable before the
// file is linked: such a file is an orphan (invisible, verify "orphan",
// swept), while a CSV file with pyrosome's empty claim (or an old Quiver
// file with a plain one) stays visible and "unrecorded".
//
// The killed append is made by the store's own write path: its commit
// (the log segment's creation) fails, and so does the removal of its file,
// which leaves on storage exactly what a kill -9 in that window leaves
// (claim and file, no record). On a local disk the checks are also run on
// the disk a power loss at that moment would leave (crashfs).
func TestCSVUncommittedAppendInvisible(t *testing.T) {
	cases := []struct {
		name string
		// segment is the operation that publishes a log segment: a
		// Writer's Commit on relaxed storage (local disks), an exclusive
		// create on object stores.
		segment faultfs.Op
		new     func(t *testing.T) csvSetup
	}{
		{"local-kill", faultfs.Commit, func(t *testing.T) csvSetup {
			l := newLocal(t, t.TempDir())
			return csvSetup{live: l, after: func(t *testing.T) fsys.FS { return l }}
		}},
		{"local-powerloss", faultfs.Commit, func(t *testing.T) csvSetup {
			cf, err := crashfs.New(t.Context(), newLocal(t, t.TempDir()), crashfs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return csvSetup{live: cf, after: func(t *testing.T) fsys.FS {
				img := filepath.Join(t.TempDir(), "rebooted")
				if _, err := cf.Crash(img); err != nil {
					t.Fatal(err)
				}
				return newLocal(t, img)
			}}
		}},
		{"s3", faultfs.CreateExclusive, func(t *testing.T) csvSetup {
			f := s3Storage(t).new(t)
			return csvSetup{live: f, after: func(t *testing.T) fsys.FS { return f }}
		}},
	}
	for _, tc := range cases {
		for _, pyroVersion := range []bool{false, true} {
			name := tc.name + "/quiver-version"
			if pyroVersion {
				name = tc.name + "/pyrosome-version"
			}
			t.Run(name, func(t *testing.T) { csvKilledAppend(t, tc.new(t), tc.segment, tc.name == "s3", pyroVersion) })
		}
	}
}

// csvKilledAppend is one case of TestCSVUncommittedAppendInvisible: the
// version written by Quiver or by pyrosome, on local or object storage.
func csvKilledAppend(t *testing.T, su csvSetup, segment faultfs.Op, objectStore, pyroVersion bool) {
	ctx := t.Context()
	ff := faultfs.New(su.live)
	s := openOn(t, ff)
	k := []string{"t01", "csv"}
	create := func(name, data string) {
		t.Helper()
		if err := ff.CreateExclusive(ctx, "t01/csv/"+name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	want := []int64{1, 2}
	var unrecorded []string // pyrosome's files
	if pyroVersion {
		// pyrosome's write: its data, then the manifest.
		create("v0/0.csv", "id\n1\n2\n")
		create("manifest.json", `{"latest_data_dir": "v0"}`)
		unrecorded = append(unrecorded, "0.csv")
	} else if _, err := putIDs(ctx, s, store.ModeWrite, k, store.PutOptions{Format: "csv", RequestID: "w"}, 1, 2); err != nil {
		t.Fatal(err)
	}
	if pyroVersion || !objectStore {
		// pyrosome appends index 1: an empty claim, then its file.
		// (pyrosome does not write to object stores, whose readers
		// list no version Quiver wrote.)
		create("v0/.1.csv.claim", "")
		create("v0/1.csv", "id\n10\n")
		unrecorded = append(unrecorded, "1.csv")
		want = append(want, 10)
	}
	killed := fmt.Sprintf("t01/csv/v0/%d.csv", len(unrecorded)+boolInt(!pyroVersion))

	// Quiver's append dies before its commit.
	injected := errors.New("killed")
	ff.Add(faultfs.Rule{Op: segment, Glob: "*.ndjson", Err: injected},
		faultfs.Rule{Op: faultfs.Delete, Glob: "*.csv", Err: syscall.EIO})
	if _, err := putIDs(ctx, s, store.ModeAppend, k, store.PutOptions{RequestID: "job-7"}, 3, 4); !errors.Is(err, injected) {
		t.Fatalf("append with its commit failing: %v", err)
	}
	ff.Clear()
	if got := readIDsOf(t, s, k, store.Latest); !slices.Equal(got, want) {
		t.Fatalf("read by the server that wrote it: %v, want %v (the uncommitted append hidden)", got, want)
	}

	// The server restarted (after a power loss: on what the disk kept).
	f := su.after(t)
	s2 := openOn(t, f, store.WithHost("rebooted"), store.WithLockStaleAfter(time.Millisecond))
	claim := path.Join(path.Dir(killed), "."+path.Base(killed)+".claim")
	if b, _, err := f.ReadFile(ctx, claim); err != nil || len(b) == 0 {
		t.Fatalf("the killed append's claim: %q, %v (want it marked)", b, err)
	}
	if _, err := f.Stat(ctx, killed); err != nil {
		t.Fatalf("the killed append's file is not on storage, nothing is tested: %v", err)
	}
	if got := readIDsOf(t, s2, k, store.Latest); !slices.Equal(got, want) {
		t.Fatalf("read after the restart: %v, want %v", got, want)
	}
	in, err := s2.Inspect(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	vs := in.Versions[len(in.Versions)-1]
	var gotUnrec []string
	for _, df := range vs.Unrecorded {
		gotUnrec = append(gotUnrec, path.Base(df.Path))
	}
	if len(vs.Orphans) != 1 || vs.Orphans[0].Name != killed || !slices.Equal(gotUnrec, unrecorded) {
		t.Fatalf("inspect: orphans %+v unrecorded %v, want %s an orphan and %v unrecorded", vs.Orphans, gotUnrec, killed, unrecorded)
	}
	checkVerify := func(orphan string) {
		t.Helper()
		rep, err := maint.Verify(ctx, s2, maint.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]string{}
		for _, p := range rep.Problems {
			if p.Kind != maint.ProblemStaleLock { // the lock a power loss kept
				kinds[p.Path] = p.Kind
			}
		}
		wantKinds := map[string]string{}
		for _, u := range unrecorded {
			wantKinds["t01/csv/v0/"+u] = maint.ProblemUnrecorded
		}
		if orphan != "" {
			wantKinds[orphan] = maint.ProblemOrphan
		}
		if !maps.Equal(kinds, wantKinds) {
			t.Fatalf("verify: %+v, want %v", rep.Problems, wantKinds)
		}
	}
	checkVerify(killed)

	// The client's retry with its request id writes the rows once; the
	// next one is answered from the log.
	c, err := putIDs(ctx, s2, store.ModeAppend, k, store.PutOptions{RequestID: "job-7"}, 3, 4)
	if err != nil || c.Replayed || path.Join("t01/csv", c.Files[0].Path) == killed {
		t.Fatalf("retry: %+v, %v", c, err)
	}
	want = append(want, 3, 4)
	if got := readIDsOf(t, s2, k, store.Latest); !slices.Equal(got, want) {
		t.Fatalf("read after the retry: %v, want %v", got, want)
	}
	if c2, err := putIDs(ctx, s2, store.ModeAppend, k, store.PutOptions{RequestID: "job-7"}, 3, 4); err != nil || !c2.Replayed || c2.Seq != c.Seq {
		t.Fatalf("second retry: %+v, %v", c2, err)
	}

	// Sweep removes the orphan and leaves pyrosome's files.
	sw, err := maint.Sweep(ctx, s2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sw.Removed, []string{killed}) {
		t.Fatalf("sweep removed %v, want %s only", sw.Removed, killed)
	}
	if got := readIDsOf(t, s2, k, store.Latest); !slices.Equal(got, want) {
		t.Fatalf("read after sweep: %v, want %v", got, want)
	}
	checkVerify("")
}

// csvSetup is the storage of a case of TestCSVUncommittedAppendInvisible.
type csvSetup struct {
	live  fsys.FS                    // the storage the killed server used
	after func(t *testing.T) fsys.FS // what the restarted server finds
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// linkHookFS is crashfs calling hook before a Writer links a root CSV
// data file to its name.
type linkHookFS struct {
	*crashfs.FS
	hook func(name string)
}

func (h *linkHookFS) CreateSync(ctx context.Context, name string, sync fsys.Sync) (fsys.Writer, error) {
	w, err := h.FS.CreateSync(ctx, name, sync)
	if err != nil || !strings.HasSuffix(name, ".csv") {
		return w, err
	}
	return &hookedWriter{DataSyncWriter: w.(DataSyncWriter), hook: func() { h.hook(name) }}, nil
}

// DataSyncWriter is a Writer whose content can be synced before Commit.
type DataSyncWriter interface {
	fsys.Writer
	fsys.DataSyncer
}

type hookedWriter struct {
	DataSyncWriter
	hook func()
}

func (w *hookedWriter) Commit(ctx context.Context) error {
	w.hook()
	return w.DataSyncWriter.Commit(ctx)
}

// TestCSVClaimMarkDurableBeforeFile: the mark that hides an uncommitted
// CSV append is on disk before the file has its name, so no power loss
// keeps the file without it (which would serve its rows for good by
// pyrosome's rule). The disk a power loss would leave is taken at the
// moment each CSV file of a write and of appends is linked.
func TestCSVClaimMarkDurableBeforeFile(t *testing.T) {
	ctx := t.Context()
	cf, err := crashfs.New(ctx, newLocal(t, t.TempDir()), crashfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	h := &linkHookFS{FS: cf, hook: func(name string) {
		img := filepath.Join(t.TempDir(), "crash")
		if _, err := cf.Crash(img); err != nil {
			t.Error(err)
			return
		}
		images = append(images, img)
	}}
	s := openOn(t, h)
	k := []string{"t01", "durable"}
	if _, err := putIDs(ctx, s, store.ModeWrite, k, store.PutOptions{Format: "csv"}, 1); err != nil {
		t.Fatal(err)
	}
	images = images[:0] // a write's files are hidden by its uncommitted version
	for i := range 3 {
		if _, err := putIDs(ctx, s, store.ModeAppend, k, store.PutOptions{}, int64(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(images) != 3 {
		t.Fatalf("%d CSV appends linked, want 3", len(images))
	}
	for i, img := range images {
		l := newLocal(t, img)
		b, _, err := l.ReadFile(ctx, path.Join("t01/durable/v0", "."+string(rune('1'+i))+".csv.claim"))
		if err != nil || len(b) == 0 {
			t.Errorf("append %d: the disk before its file was linked holds its claim as %q, %v; want the mark", i, b, err)
		}
	}
}

func newLocal(t *testing.T, dir string) *fsys.Local {
	t.Helper()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// s3Storage is the object store of storages.
func s3Storage(t *testing.T) storage {
	for _, st := range storages(t) {
		if st.name == "s3" {
			return st
		}
	}
	t.Fatal("no s3 storage")
	return storage{}
}
