package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/quiverdb/quiver/store/fsys"
)

// TestRetireOnlyWhatItMay: RetireVersions does not trust its pick: the
// latest version, versions that were never committed and versions that
// do not exist are never retired, whatever pick returns.
func TestRetireOnlyWhatItMay(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"r"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeWrite, k, ids(2), PutOptions{})
	if err := os.Mkdir(filepath.Join(dir, "r", "v3"), 0o755); err != nil { // a write in progress
		t.Fatal(err)
	}
	var seen []RetireCandidate
	out, err := s.RetireVersions(context.Background(), k, "", func(latest int, cands []RetireCandidate) []int {
		if latest != 2 {
			t.Errorf("latest %d", latest)
		}
		seen = cands
		return []int{2, 3, 9, 1}
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != "[v1]" {
		t.Fatalf("retired %v, want [v1]", out)
	}
	if len(seen) != 2 || seen[0].Version != 0 || seen[1].Version != 1 || seen[0].Superseded.IsZero() || seen[1].Superseded.Before(seen[0].Superseded) {
		t.Fatalf("candidates %+v", seen)
	}
	for _, v := range []string{"v0", "v2", "v3"} {
		if _, err := os.Stat(filepath.Join(dir, "r", v)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	var modes []string
	if err := s.Lineage(context.Background(), k, func(c *CommitRecord) error {
		modes = append(modes, c.Version+"/"+string(c.Mode)+"/"+c.Writer)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if last := modes[len(modes)-1]; last != "v1/retire/"+s.opts.writer {
		t.Fatalf("lineage %v", modes)
	}
	// Nothing chosen: nothing written.
	if out, err := s.RetireVersions(context.Background(), k, "w", func(int, []RetireCandidate) []int { return nil }); err != nil || len(out) != 0 {
		t.Fatalf("%v %v", out, err)
	}
	in, err := s.Inspect(context.Background(), k)
	if err != nil || len(in.Log) != 4 || len(in.LogProblems) > 0 {
		t.Fatalf("inspect %+v %v", in, err)
	}
}

// TestReaderOfRetiredVersion: a reader holding a snapshot (a planned
// ticket) of a version that retention then removes gets ErrVersionNotFound,
// never ErrDataLoss: the files are gone on purpose.
func TestReaderOfRetiredVersion(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	k := []string{"r"}
	put(t, s, ModeWrite, k, ids(1, 2), PutOptions{})
	put(t, s, ModeWrite, k, ids(3), PutOptions{})
	sn, err := s.Snapshot(ctx, k, SnapshotOptions{Version: 0})
	if err != nil {
		t.Fatal(err)
	}
	// Another server retires it.
	other, err := Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if out := retireAllButLatest(t, other, k); fmt.Sprint(out) != "[v0]" {
		t.Fatalf("retired %v", out)
	}
	rdr, err := s.OpenSnapshot(ctx, sn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	for rdr.Next() {
	}
	if err := rdr.Err(); !errors.Is(err, ErrVersionNotFound) || errors.Is(err, ErrDataLoss) {
		t.Fatalf("read of a retired version: %v", err)
	}
	_, err = s.Snapshot(ctx, k, SnapshotOptions{Version: 0, Files: []string{"v0/0.parquet"}})
	if !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("pinned snapshot of a retired version: %v", err)
	}
	if got := readIDs(t, s, k, Latest); fmt.Sprint(got) != "[3]" {
		t.Fatalf("latest %v", got)
	}
}

// retireOnReadFS runs hook once, just before the first read of a file
// named name: another server's retention, landing between this server's
// read of the log and its read of the version.
type retireOnReadFS struct {
	fsys.FS
	name string
	once sync.Once
	hook func()
}

func (f *retireOnReadFS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	if name == f.name {
		f.once.Do(f.hook)
	}
	return f.FS.ReadFile(ctx, name)
}

// TestRetiredByAnotherServerWhileRead: a version another server retires
// while this one reads it is not reported as lost (DataLoss: "its
// .version.json … is missing"): the retire record, committed before the
// directory went, is read first (seen once in the model test).
func TestRetiredByAnotherServerWhileRead(t *testing.T) {
	a, dir := newTestStore(t)
	k := []string{"r"}
	for v := range 3 {
		put(t, a, ModeWrite, k, ids(int64(v)), PutOptions{})
	}
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs := &retireOnReadFS{FS: l, name: "r/v0/" + versionInfoName, hook: func() {
		if _, err := a.RetireVersions(context.Background(), k, "test", func(int, []RetireCandidate) []int { return []int{0} }); err != nil {
			t.Error(err)
		}
	}}
	b, err := Open(dir, WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := b.Read(context.Background(), k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 0}})
	if err == nil {
		rdr.Release()
		t.Fatal("read v0 after its retirement: no error")
	}
	if errors.Is(err, ErrDataLoss) {
		t.Fatalf("read v0 while another server retired it: %v", err)
	}
	if got := readIDs(t, b, k, Latest); !slices.Equal(got, []int64{2}) {
		t.Fatalf("latest %v", got)
	}
}
