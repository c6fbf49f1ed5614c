package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/ipccache"
)

// waitReadAhead waits until no goroutine of a reader's read ahead runs
// (they end when the reader is released or its read ends), failing after
// a while.
func waitReadAhead(t *testing.T) {
	t.Helper()
	buf := make([]byte, 4<<20)
	for i := 0; i < 300; i++ {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "store.(*SnapshotReader).") {
			return
		}
		if i == 299 {
			t.Fatalf("read ahead still running:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// histProfile writes a profile of n appends of 1..n rows (ids in order)
// partitioned by p (in ["a","b","c"]) when partitioned, and returns the
// ids in read order.
func histProfile(t *testing.T, s *Store, keys []string, n int, partitioned bool) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "p", Type: arrow.BinaryTypes.String}}, nil)
	next := int64(0)
	for i := 0; i < n; i++ {
		var sb strings.Builder
		sb.WriteString("[")
		for j := 0; j <= i%7; j++ {
			if j > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"id": %d, "p": %q}`, next, []string{"a", "b", "c"}[i%3])
			next++
		}
		sb.WriteString("]")
		o := PutOptions{}
		mode := ModeAppend
		if i == 0 {
			mode = ModeWrite
			if partitioned {
				o.PartitionBy = []string{"p"}
			}
		}
		put(t, s, mode, keys, fromJSON(t, sc, sb.String()), o)
	}
}

// aheadIDs reads a profile and returns its ids in order.
func aheadIDs(t *testing.T, s *Store, keys []string, o ReadOptions) ([]int64, error) {
	t.Helper()
	rdr, err := s.Read(context.Background(), keys, o)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		col := rec.Column(int(rec.Schema().FieldIndices("id")[0])).(*array.Int64)
		out = append(out, col.Int64Values()...)
	}
	return out, rdr.Err()
}

// TestReadAheadOrder: however many files are read ahead, a read yields
// every row once, files in index order (partitioned or not), and frees
// everything — also when released early or cancelled.
func TestReadAheadOrder(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		for _, ahead := range []int{1, 2, 3, 8} {
			t.Run(fmt.Sprintf("partitioned=%v/ahead=%d", partitioned, ahead), func(t *testing.T) {
				s, _ := newTestStore(t, WithReadAhead(ahead), WithReadBatchRows(2))
				keys := []string{"h"}
				histProfile(t, s, keys, 20, partitioned)
				got, err := aheadIDs(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, Join: ahead%2 == 0})
				if err != nil {
					t.Fatal(err)
				}
				sn, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest})
				if err != nil {
					t.Fatal(err)
				}
				// The expected order: the files' index order, each file's
				// rows in order.
				var want []int64
				for _, f := range sn.Files {
					one := *sn
					one.Files = []DataFile{f}
					r, err := s.ReadSnapshot(context.Background(), &one, ReadOptions{})
					if err != nil {
						t.Fatal(err)
					}
					for r.Next() {
						want = append(want, r.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
					}
					if r.Err() != nil {
						t.Fatal(r.Err())
					}
					r.Release()
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || int64(len(got)) != sn.Rows() || len(got) == 0 {
					t.Fatalf("read %v\nwant %v", got, want)
				}
				// Released after one batch.
				rdr, err := s.Read(context.Background(), keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
				if err != nil {
					t.Fatal(err)
				}
				if !rdr.Next() {
					t.Fatal(rdr.Err())
				}
				rdr.Release()
				// Cancelled after one batch.
				ctx, cancel := context.WithCancel(context.Background())
				rdr, err = s.Read(ctx, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
				if err != nil {
					t.Fatal(err)
				}
				if !rdr.Next() {
					t.Fatal(rdr.Err())
				}
				cancel()
				for rdr.Next() {
				}
				if !errors.Is(rdr.Err(), context.Canceled) {
					t.Errorf("cancelled read: %v", rdr.Err())
				}
				rdr.Release()
				waitReadAhead(t)
			})
		}
	}
}

// TestReadAheadFailsInOrder: a damaged file in the middle of a profile
// fails the read after the rows of the files before it, never before
// them, and never with fewer rows silently; the files read ahead of it
// are freed.
func TestReadAheadFailsInOrder(t *testing.T) {
	s, dir := newTestStore(t, WithReadAhead(4))
	keys := []string{"h"}
	histProfile(t, s, keys, 12, false)
	sn, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest})
	if err != nil {
		t.Fatal(err)
	}
	var before int64
	for _, f := range sn.Files[:5] {
		before += f.Rows
	}
	victim := filepath.Join(dir, "h", filepath.FromSlash(sn.Files[5].Path))
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	got, err := aheadIDs(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, Join: true})
	if !errors.Is(err, ErrDataLoss) {
		t.Fatalf("read: %v", err)
	}
	if int64(len(got)) != before {
		t.Errorf("%d rows before the error, want the %d of the files before it", len(got), before)
	}
	waitReadAhead(t)
}

// TestReadAheadBoundsMemory: a read whose consumer stops holds a few
// batches per file read ahead, not the profile.
func TestReadAheadBoundsMemory(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	s, _ := newTestStore(t, WithReadAhead(2), WithReadBatchRows(1000), WithAllocator(mem))
	keys := []string{"m"}
	vals := make([]int64, 100_000)
	for i := range vals {
		vals[i] = int64(i)
	}
	put(t, s, ModeWrite, keys, ids(vals...), PutOptions{})
	for i := 0; i < 9; i++ {
		put(t, s, ModeAppend, keys, ids(vals...), PutOptions{})
	}
	rdr, err := s.Read(context.Background(), keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, BatchBytes: 64 << 10, Join: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rdr.Next() {
		t.Fatal(rdr.Err())
	}
	if n := rdr.RecordBatch().NumRows(); n < 2000 || n > 8192 {
		t.Errorf("batches of 1,000 rows (8 KB) joined into %d rows, want about 64 KiB", n)
	}
	time.Sleep(200 * time.Millisecond) // the read ahead fills its queues
	// 1,000 rows of int64 are 8 KB a batch; the profile is 8 MB. Files
	// read ahead each hold their queue, a batch being made and a decoder.
	if held := mem.CurrentAlloc(); held > 4<<20 {
		t.Errorf("a stalled read holds %d bytes", held)
	}
	rdr.Release()
	mem.AssertSize(t, 0)
}

// cachedStore opens a store with an IPC cache in a temp dir.
func cachedStore(t *testing.T, opts ...Option) (*Store, string, *ipccache.Cache) {
	t.Helper()
	c, err := ipccache.Open(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, dir := newTestStore(t, append([]Option{WithCache(c)}, opts...)...)
	t.Cleanup(func() { s.Close() })
	return s, dir, c
}

// readRows reads keys with o into JSON rows, also asking each batch's
// cached message when there is one.
func readCached(t *testing.T, s *Store, keys []string, o ReadOptions) (string, int, error) {
	t.Helper()
	o.Cached, o.Join = true, true // as DoGet reads
	rdr, err := s.Read(context.Background(), keys, o)
	if err != nil {
		return "", 0, err
	}
	defer rdr.Release()
	var rows []json.RawMessage
	raw := 0
	for rdr.Next() {
		if _, _, _, ok := rdr.Message(); ok {
			raw++
		}
		b, err := rdr.RecordBatch().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var part []json.RawMessage
		if err := json.Unmarshal(b, &part); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, part...)
	}
	b, _ := json.Marshal(rows)
	return string(b), raw, rdr.Err()
}

// TestCacheServesWhatParquetDoes: a cached read yields exactly what the
// Parquet read yields — every column (the cached messages as they are),
// some columns, some partitions — and the cache fills on first read
// (in the background for a read of some columns).
func TestCacheServesWhatParquetDoes(t *testing.T) {
	s, _, c := cachedStore(t, WithReadBatchRows(3))
	keys := []string{"h"}
	histProfile(t, s, keys, 9, true)
	cases := []ReadOptions{
		{SnapshotOptions: SnapshotOptions{Version: Latest}},
		{SnapshotOptions: SnapshotOptions{Version: Latest}, Columns: []string{"id"}},
		{SnapshotOptions: SnapshotOptions{Version: Latest}, Columns: []string{"p", "id"}},
		{SnapshotOptions: SnapshotOptions{Version: Latest, Partition: map[string][]string{"p": {"b"}}}},
	}
	plain := func(o ReadOptions) string {
		_, rows := readAll(t, s, keys, o)
		return rows
	}
	for i, o := range cases {
		want := plain(o)
		got, _, err := readCached(t, s, keys, o)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("case %d: cold cached read %s, want %s", i, got, want)
		}
	}
	// Every file is in the cache now, with every column (the first case
	// read them all) and with the columns of each projection.
	sn, _ := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest})
	if st := c.Stats(); st.Entries != 3*len(sn.Files) {
		t.Fatalf("%d entries for %d files: %+v", st.Entries, len(sn.Files), st)
	}
	for i, o := range cases {
		before := c.Stats().Hits
		want := plain(o)
		got, raw, err := readCached(t, s, keys, o)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("case %d: hot cached read %s, want %s", i, got, want)
		}
		if c.Stats().Hits == before {
			t.Errorf("case %d: no cache hit", i)
		}
		if raw == 0 {
			t.Errorf("case %d: no batch streamed as the cache holds it", i)
		}
	}
}

// TestCacheProjections: a read of some columns keeps them as entries of
// their own; a read of other columns served from the entries of every
// column keeps its columns too; hot, each streams its entries as they
// are.
func TestCacheProjections(t *testing.T) {
	s, _, c := cachedStore(t)
	keys := []string{"h"}
	histProfile(t, s, keys, 4, false)
	latest := SnapshotOptions{Version: Latest}
	ids := ReadOptions{SnapshotOptions: latest, Columns: []string{"id"}}
	if _, raw, err := readCached(t, s, keys, ids); err != nil || raw != 0 {
		t.Fatalf("cold: %d cached batches, %v", raw, err)
	}
	if st := c.Stats(); st.Entries != 4 || st.Hits != 0 {
		t.Fatalf("after a read of one column: %+v", st)
	}
	if _, raw, err := readCached(t, s, keys, ids); err != nil || raw != 4 {
		t.Fatalf("hot: %d cached batches, %v", raw, err)
	}
	// Every column, then another projection picked from those entries.
	if _, _, err := readCached(t, s, keys, ReadOptions{SnapshotOptions: latest}); err != nil {
		t.Fatal(err)
	}
	p := ReadOptions{SnapshotOptions: latest, Columns: []string{"p"}}
	hits := c.Stats().Hits
	if _, raw, err := readCached(t, s, keys, p); err != nil || raw != 0 || c.Stats().Hits != hits+4 {
		t.Fatalf("from every column: %d cached batches, %v, %+v", raw, err, c.Stats())
	}
	if _, raw, err := readCached(t, s, keys, p); err != nil || raw != 4 {
		t.Fatalf("hot: %d cached batches, %v", raw, err)
	}
	if st := c.Stats(); st.Entries != 12 {
		t.Fatalf("entries %+v", st)
	}
}

// TestCacheNeverTheTruth: a cached file that is then lost, altered or
// retired fails the read as it would without the cache (DataLoss; NotFound
// for a pinned file of a retired version); a damaged cache entry falls
// back to the Parquet file.
func TestCacheNeverTheTruth(t *testing.T) {
	const file = "t/v0/1.parquet"
	cases := []struct {
		name   string
		verify bool
		tamper func(t *testing.T, s *Store, dir string)
		want   error
	}{
		{"missing", false, func(t *testing.T, _ *Store, dir string) {
			if err := os.Remove(filepath.Join(dir, file)); err != nil {
				t.Fatal(err)
			}
		}, ErrDataLoss},
		{"truncated", false, func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, file)
			b, _ := os.ReadFile(p)
			writeFile(t, p, string(b[:len(b)/2]), 0)
		}, ErrDataLoss},
		{"same size, undecodable", false, func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, file)
			b, _ := os.ReadFile(p)
			writeFile(t, p, strings.Repeat("z", len(b)), 0)
		}, ErrDataLoss},
		{"one byte flipped, verify-reads", true, func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, file)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x40
			st, _ := os.Stat(p)
			writeFile(t, p, string(b), 0)
			// Even with its old modification time.
			if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, ErrDataLoss},
		{"replaced by a symbolic link", false, func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, file)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("0.parquet", p); err != nil {
				t.Fatal(err)
			}
		}, ErrDataLoss},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, dir, c := cachedStore(t, WithVerifyReads(tc.verify))
			k := []string{"t"}
			put(t, s, ModeWrite, k, ids(1, 2, 3), PutOptions{})
			put(t, s, ModeAppend, k, ids(4, 5), PutOptions{})
			if _, _, err := readCached(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}}); err != nil {
				t.Fatal(err)
			}
			// With verify-reads the cache is not used at all.
			if want := map[bool]int{false: 2, true: 0}[tc.verify]; c.Stats().Entries != want {
				t.Fatalf("entries: %+v, want %d", c.Stats(), want)
			}
			tc.tamper(t, s, dir)
			rows, _, err := readCached(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("read: %v (rows %s), want %v", err, rows, tc.want)
			}
			if strings.Contains(err.Error(), dir) {
				t.Errorf("error shows the server path: %v", err)
			}
		})
	}
	t.Run("damaged entry", func(t *testing.T) {
		s, _, c := cachedStore(t)
		k := []string{"t"}
		put(t, s, ModeWrite, k, ids(1, 2, 3), PutOptions{})
		want, _, err := readCached(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
		if err != nil {
			t.Fatal(err)
		}
		des, _ := os.ReadDir(c.Dir())
		for _, de := range des {
			if strings.HasSuffix(de.Name(), ".arrows") {
				p := filepath.Join(c.Dir(), de.Name())
				b, _ := os.ReadFile(p)
				b[len(b)/3] ^= 1
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The cache checks an entry once per process: a new one.
		c.Close()
		c2, err := ipccache.Open(c.Dir(), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		s.cache = c2
		got, raw, err := readCached(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
		if err != nil || got != want || raw != 0 {
			t.Fatalf("read %s (%d cached), %v; want %s", got, raw, err, want)
		}
		if st := c2.Stats(); st.Corrupt != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}
