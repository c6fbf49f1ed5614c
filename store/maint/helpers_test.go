package maint_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// The pyrosome fixture (written by pyrosome itself) at the repository root.
const pyrosomeFixture = "../../testdata/pyrosome-0.1.12"

// newStore opens a store on a temp dir with a checked allocator that must
// be empty when the test ends.
func newStore(t *testing.T, opts ...store.Option) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	s, err := store.Open(dir, append([]store.Option{store.WithAllocator(mem), store.WithLockTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

var idSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)

var regionSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// ids builds a one-column int64 batch reader.
func ids(vals ...int64) array.RecordReader {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, nil)
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(idSchema, []arrow.Array{col}, int64(len(vals)))
	defer rec.Release()
	rdr, err := array.NewRecordReader(idSchema, []arrow.RecordBatch{rec})
	if err != nil {
		panic(err)
	}
	return rdr
}

// fromJSON builds a reader of one batch from JSON rows.
func fromJSON(t *testing.T, sc *arrow.Schema, rows string) array.RecordReader {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

func put(t *testing.T, s *store.Store, mode store.Mode, keys []string, rdr array.RecordReader, o store.PutOptions) *store.CommitRecord {
	t.Helper()
	defer rdr.Release()
	o.Mode = mode
	c, err := s.Put(context.Background(), keys, rdr, o)
	if err != nil {
		t.Fatalf("%s %v: %v", mode, keys, err)
	}
	return c
}

// readIDs reads the id column of a version (-1: latest).
func readIDs(t *testing.T, s *store.Store, keys []string, version int) []int64 {
	t.Helper()
	rdr, err := s.Read(context.Background(), keys, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: version}, Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		out = append(out, rdr.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// auditFixture fills a store with an unpartitioned profile sales/orders
// (v0: write + 2 appends: log records 1..3) and a partitioned one
// sales/parts (v0: write + append, partitioned by region: records 1..2).
// Six committed files in all.
func auditFixture(t *testing.T, s *store.Store) {
	t.Helper()
	orders := []string{"sales", "orders"}
	put(t, s, store.ModeWrite, orders, ids(1, 2, 3), store.PutOptions{SchemaVersion: "1.0.0"})
	put(t, s, store.ModeAppend, orders, ids(4), store.PutOptions{})
	put(t, s, store.ModeAppend, orders, ids(5), store.PutOptions{})
	parts := []string{"sales", "parts"}
	put(t, s, store.ModeWrite, parts, fromJSON(t, regionSchema, `[{"id":1,"region":"eu"},{"id":2,"region":"us"}]`), store.PutOptions{PartitionBy: []string{"region"}})
	put(t, s, store.ModeAppend, parts, fromJSON(t, regionSchema, `[{"id":3,"region":"eu"}]`), store.PutOptions{})
}

// tree lists every file and dir under dir, relative, sorted.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// hashTree maps every path under dir to its content hash ("dir" for dirs,
// "link" for symbolic links).
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rel := range tree(t, dir) {
		p := filepath.Join(dir, rel)
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case st.Mode()&os.ModeSymlink != 0:
			out[rel] = "link"
		case st.IsDir():
			out[rel] = "dir"
		case !st.Mode().IsRegular():
			out[rel] = "special" // a FIFO: reading it would block
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.Sum256(b)
			out[rel] = hex.EncodeToString(h[:])
		}
	}
	return out
}

func touchOld(t *testing.T, p string, age time.Duration) {
	t.Helper()
	old := time.Now().Add(-age)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p string, data string, age time.Duration) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); err == nil {
		_ = os.Chmod(p, 0o644)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if age > 0 {
		touchOld(t, p, age)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	writeFile(t, dst, string(readFile(t, src)), 0)
}

// copyTree copies a fixture so tests may write into it.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deadPID returns the pid of a process that has exited (and been reaped).
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// problems lists a report's problems as sorted, distinct "kind path".
func problems(ps []maint.Problem) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		k := p.Kind + " " + p.Path
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
