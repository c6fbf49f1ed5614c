package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/ipccache"
)

var tamperSchema = arrow.NewSchema([]arrow.Field{
	{Name: "x", Type: arrow.PrimitiveTypes.Int64},
	{Name: "s", Type: arrow.BinaryTypes.String},
}, nil)

const tamperRows = `[{"x":0,"s":"v0"},{"x":1,"s":"v1"},{"x":2,"s":"v2"},{"x":3,"s":"v3"},{"x":4,"s":"v4"},
{"x":5,"s":"v5"},{"x":6,"s":"v6"},{"x":7,"s":"v7"},{"x":8,"s":"v8"},{"x":9,"s":"v9"}]`

// cacheEntries lists the cache's entry files.
func cacheEntries(t *testing.T, c *ipccache.Cache) []string {
	t.Helper()
	des, err := os.ReadDir(c.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".arrows") {
			ps = append(ps, filepath.Join(c.Dir(), de.Name()))
		}
	}
	return ps
}

// tamperEntry replaces "v3v4" with "ZZv4" in the entry holding it, keeping
// its size and modification time; reseal recomputes every checksum of the
// entry (its messages', the whole file's), as someone who can write the
// cache directory can.
func tamperEntry(t *testing.T, c *ipccache.Cache, reseal bool) {
	t.Helper()
	for _, p := range cacheEntries(t, c) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, []byte("v3v4"))
		if i < 0 {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		copy(b[i:], "ZZ")
		if reseal {
			resealEntry(b)
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no cache entry holds the values")
}

// resealEntry recomputes an entry's checksums (format 2: 40-byte index
// rows, the message's CRC-32C at 32; a 32-byte trailer, the file's at 16).
func resealEntry(b []byte) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	size := int64(len(b))
	tr := b[size-32:]
	n := int64(binary.LittleEndian.Uint64(tr))
	idx := size - 32 - n*40
	for i := range n {
		row := b[idx+i*40:]
		off := int64(binary.LittleEndian.Uint64(row))
		padded := int64(binary.LittleEndian.Uint32(row[12:]))
		body := int64(binary.LittleEndian.Uint64(row[16:]))
		binary.LittleEndian.PutUint32(row[32:], crc32.Checksum(b[off:off+8+padded+body], tab))
	}
	binary.LittleEndian.PutUint32(tr[16:], crc32.Checksum(b[:size-16], tab))
}

// TestCacheTamperedEntry (red team g01): a cache entry changed on disk is
// never served as the profile's data by a server that checks its reads.
// Without verify-reads a change made after the process checked the entry
// fails the read (every message is checked on every read) and the next
// read decodes the file; a change with every checksum recomputed is
// served (the cache directory must be private: documented). With
// verify-reads the cache is not used at all — neither read nor filled —
// so even a resealed entry, in a running or a restarted process, is not.
func TestCacheTamperedEntry(t *testing.T) {
	latest := ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}}
	k := []string{"a", "b"}
	setup := func(t *testing.T) (*Store, *ipccache.Cache, string) {
		s, _, c := cachedStore(t)
		put(t, s, ModeWrite, k, fromJSON(t, tamperSchema, tamperRows), PutOptions{})
		want, _, err := readCached(t, s, k, latest) // fills
		if err != nil {
			t.Fatal(err)
		}
		if _, raw, err := readCached(t, s, k, latest); err != nil || raw == 0 { // opens and checks
			t.Fatalf("not served from the cache: %d, %v", raw, err)
		}
		return s, c, want
	}
	t.Run("changed after the first open", func(t *testing.T) {
		s, c, want := setup(t)
		tamperEntry(t, c, false)
		got, _, err := readCached(t, s, k, latest)
		if strings.Contains(got, "ZZ") {
			t.Fatalf("altered bytes served: %s", got)
		}
		if !errors.Is(err, ErrCacheChanged) || strings.Contains(err.Error(), c.Dir()) {
			t.Fatalf("read: %v", err)
		}
		// Dropped: the next read decodes the file, and fills again.
		if got, _, err := readCached(t, s, k, latest); err != nil || got != want {
			t.Fatalf("after the drop: %s, %v", got, err)
		}
		if got, raw, err := readCached(t, s, k, latest); err != nil || got != want || raw == 0 {
			t.Fatalf("refilled: %s (%d cached), %v", got, raw, err)
		}
	})
	t.Run("resealed, without verify-reads", func(t *testing.T) {
		// The limit of the checksums (and the proof that resealEntry
		// makes an entry the cache accepts).
		s, c, _ := setup(t)
		tamperEntry(t, c, true)
		c.Close()
		c2, err := ipccache.Open(c.Dir(), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		s.cache = c2
		if got, _, err := readCached(t, s, k, latest); err != nil || !strings.Contains(got, "ZZ") {
			t.Fatalf("resealed entry not served without verify-reads: %s, %v", got, err)
		}
	})
	for _, restart := range []bool{false, true} {
		name := "verify-reads, resealed, running"
		if restart {
			name = "verify-reads, resealed, restarted"
		}
		t.Run(name, func(t *testing.T) {
			s, c, want := setup(t)
			tamperEntry(t, c, true)
			if restart {
				c.Close()
				c2, err := ipccache.Open(c.Dir(), 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				defer c2.Close()
				s.cache, c = c2, c2
			}
			s.opts.verifyReads = true
			before := c.Stats()
			for range 2 {
				got, raw, err := readCached(t, s, k, latest)
				if err != nil || got != want || raw != 0 {
					t.Fatalf("read %s (%d cached), %v; want %s", got, raw, err, want)
				}
			}
			// Another projection: nothing filled either.
			if _, raw, err := readCached(t, s, k, ReadOptions{SnapshotOptions: latest.SnapshotOptions, Columns: []string{"s"}}); err != nil || raw != 0 {
				t.Fatalf("projection: %d cached, %v", raw, err)
			}
			after := c.Stats()
			if after.Hits != before.Hits || after.Misses != before.Misses || after.Fills != before.Fills || after.Entries != before.Entries {
				t.Fatalf("cache used with verify-reads: %+v, then %+v", before, after)
			}
		})
	}
}

// TestCacheEntryTruncatedDuringRead (red team g06): an entry truncated
// while a read streams it fails that read with ErrCacheChanged — no crash
// (entries are not mapped: a truncated mapping is SIGBUS) — and the store
// keeps serving: the next read decodes the file and fills the cache
// again.
func TestCacheEntryTruncatedDuringRead(t *testing.T) {
	for _, size := range []int64{0, 4096} {
		t.Run(map[int64]string{0: "to zero", 4096: "to a page"}[size], func(t *testing.T) {
			s, _, c := cachedStore(t, WithReadBatchRows(2))
			k := []string{"t"}
			vals := make([]int64, 2000)
			for i := range vals {
				vals[i] = int64(i)
			}
			put(t, s, ModeWrite, k, ids(vals...), PutOptions{})
			o := ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, Cached: true}
			want, _, err := readCached(t, s, k, o) // fills
			if err != nil {
				t.Fatal(err)
			}
			rdr, err := s.Read(context.Background(), k, o)
			if err != nil {
				t.Fatal(err)
			}
			if !rdr.Next() {
				t.Fatal(rdr.Err())
			}
			if _, _, _, ok := rdr.Message(); !ok {
				t.Fatal("not read from the cache")
			}
			for _, p := range cacheEntries(t, c) {
				if err := os.Truncate(p, size); err != nil {
					t.Fatal(err)
				}
			}
			n := rdr.RecordBatch().NumRows()
			for rdr.Next() {
				// The batches that arrive are whole and decodable.
				rec := rdr.RecordBatch()
				if rec == nil {
					t.Fatalf("after %d rows: %v", n, rdr.Err())
				}
				n += rec.NumRows()
			}
			err = rdr.Err()
			rdr.Release()
			if !errors.Is(err, ErrCacheChanged) || n >= int64(len(vals)) {
				t.Fatalf("read %d rows of %d: %v", n, len(vals), err)
			}
			if strings.Contains(err.Error(), c.Dir()) {
				t.Errorf("error shows the server path: %v", err)
			}
			if st := c.Stats(); st.Corrupt != 1 || st.Entries != 0 {
				t.Errorf("stats %+v", st)
			}
			for range 2 { // decoded and filled, then from the cache
				if got, _, err := readCached(t, s, k, o); err != nil || got != want {
					t.Fatalf("after: %v", err)
				}
			}
			if st := c.Stats(); st.Entries != 1 || st.Hits < 2 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}
