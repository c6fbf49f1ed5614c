package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sameSizeOtherRows finds two single-file profiles whose files have the
// same size but different row counts, writing scratch profiles until it
// does; it returns their data-dir-relative file paths.
func sameSizeOtherRows(t *testing.T, s *Store, dir string) (a, b string) {
	t.Helper()
	type file struct {
		path string
		rows int
	}
	bySize := map[int64][]file{}
	for n := 1; n <= 4; n++ {
		for v := int64(0); v < 60; v++ {
			vals := make([]int64, n)
			for i := range vals {
				vals[i] = v
			}
			keys := []string{"scratch", fmt.Sprintf("n%dv%d", n, v)}
			put(t, s, ModeWrite, keys, ids(vals...), PutOptions{})
			rel := filepath.Join("scratch", keys[1], "v0", "0.parquet")
			st, err := os.Stat(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range bySize[st.Size()] {
				if f.rows != n {
					return f.path, rel
				}
			}
			bySize[st.Size()] = append(bySize[st.Size()], file{rel, n})
		}
	}
	t.Fatal("no two files of the same size with different row counts")
	return "", ""
}

// TestReadsCheckRecordsTable: a committed file that no longer matches its
// record fails the read with ErrDataLoss — never fewer rows, never other
// rows — whether it is gone, shorter, longer, undecodable, holds another
// number of rows, or (with verify-reads) other bytes of the same size; a
// file replaced by a symbolic link is never followed.
func TestReadsCheckRecordsTable(t *testing.T) {
	const file = "t/v0/1.parquet"
	rewrite := func(t *testing.T, dir string, f func([]byte) []byte) {
		p := filepath.Join(dir, file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, string(f(b)), 0)
	}
	cases := []struct {
		name   string
		verify bool
		// tamper alters the store and returns the profile whose read must
		// fail.
		tamper func(t *testing.T, s *Store, dir string) []string
	}{
		{"missing", false, func(t *testing.T, _ *Store, dir string) []string {
			if err := os.Remove(filepath.Join(dir, file)); err != nil {
				t.Fatal(err)
			}
			return []string{"t"}
		}},
		{"truncated", false, func(t *testing.T, _ *Store, dir string) []string {
			rewrite(t, dir, func(b []byte) []byte { return b[:len(b)/2] })
			return []string{"t"}
		}},
		{"longer", false, func(t *testing.T, _ *Store, dir string) []string {
			rewrite(t, dir, func(b []byte) []byte { return append(b, 'x') })
			return []string{"t"}
		}},
		{"same size, undecodable", false, func(t *testing.T, _ *Store, dir string) []string {
			rewrite(t, dir, func(b []byte) []byte { return []byte(strings.Repeat("z", len(b))) })
			return []string{"t"}
		}},
		{"same size, another row count", false, func(t *testing.T, s *Store, dir string) []string {
			// A valid Parquet file of the same size holding another number
			// of rows replaces a committed one.
			a, b := sameSizeOtherRows(t, s, dir)
			bb, err := os.ReadFile(filepath.Join(dir, b))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, a), string(bb), 0)
			return strings.Split(filepath.ToSlash(filepath.Dir(filepath.Dir(a))), "/")
		}},
		{"same size, one byte flipped, verify-reads", true, func(t *testing.T, _ *Store, dir string) []string {
			rewrite(t, dir, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })
			return []string{"t"}
		}},
		{"replaced by a symbolic link", false, func(t *testing.T, _ *Store, dir string) []string {
			p := filepath.Join(dir, file)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("0.parquet", p); err != nil {
				t.Fatal(err)
			}
			return []string{"t"}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newTestStore(t, WithVerifyReads(c.verify))
			k := []string{"t"}
			put(t, s, ModeWrite, k, ids(1, 2, 3), PutOptions{})
			put(t, s, ModeAppend, k, ids(4, 5), PutOptions{})
			keys := c.tamper(t, s, dir)
			rdr, err := s.Read(context.Background(), keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
			var rows int64
			if err == nil {
				for rdr.Next() {
					rows += rdr.RecordBatch().NumRows()
				}
				err = rdr.Err()
				rdr.Release()
			}
			if !errors.Is(err, ErrDataLoss) {
				t.Fatalf("read %v: got %v (%d rows), want ErrDataLoss", keys, err, rows)
			}
			t.Log(err)
			if strings.Contains(err.Error(), dir) {
				t.Errorf("error shows the server path: %v", err)
			}
			// Planning (a snapshot) still works: the loss is found when
			// the file is read.
			if _, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest}); err != nil {
				t.Errorf("snapshot: %v", err)
			}
		})
	}
}
