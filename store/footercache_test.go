package store

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// footerEntries is how many footers s keeps.
func footerEntries(s *Store) int {
	s.footers.mu.Lock()
	defer s.footers.mu.Unlock()
	return len(s.footers.m)
}

// TestFooterCache: a read parses each committed file's footer once and
// reuses it; a file rewritten since (another inode or change time) is
// parsed again from its bytes, so a read still sees what is on disk, and
// fails as before when that is not what the record says.
func TestFooterCache(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"fc"}
	put(t, s, ModeWrite, k, ids(1, 2, 3), PutOptions{})
	rec := put(t, s, ModeAppend, k, ids(4, 5), PutOptions{})
	for range 3 {
		if got := fmt.Sprint(readIDs(t, s, k, Latest)); got != "[1 2 3 4 5]" {
			t.Fatalf("rows %s", got)
		}
	}
	if n := footerEntries(s); n != 2 {
		t.Fatalf("%d footers kept after three reads of two files, want 2", n)
	}
	// The same bytes written again (a new change time): parsed again.
	name := filepath.Join(dir, "fc", filepath.FromSlash(rec.Files[0].Path))
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.Chmod(name, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readIDs(t, s, k, Latest)); got != "[1 2 3 4 5]" {
		t.Fatalf("rows %s", got)
	}
	if n := footerEntries(s); n != 3 {
		t.Fatalf("%d footers kept after a file was rewritten, want 3 (its new footer parsed)", n)
	}
	// The footer altered in place, same size: the read parses the bytes
	// on disk and fails, as it did without the cache.
	end := len(b) - 8 // the footer ends with its length and "PAR1"
	copy(b[end-40:end], make([]byte, 40))
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rdr, err := s.Read(t.Context(), k, ReadOptions{})
	if err == nil {
		for rdr.Next() {
		}
		err = rdr.Err()
		rdr.Release()
	}
	if !errors.Is(err, ErrDataLoss) {
		t.Fatalf("read of a file whose footer was altered: %v, want ErrDataLoss", err)
	}
}

// TestFooterCacheBound: the cache keeps at most its limit of footer
// bytes, the least recently used going first.
func TestFooterCacheBound(t *testing.T) {
	s, _ := newTestStore(t)
	k := []string{"fcb"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	for i := int64(1); i < 12; i++ {
		put(t, s, ModeAppend, k, ids(i), PutOptions{})
	}
	readIDs(t, s, k, Latest)
	biggest := 0
	for _, e := range s.footers.m {
		biggest = max(biggest, e.Value.(*footerEntry).size)
	}
	s.footers = newFooterCache(5 * biggest) // room for 5 footers at least
	readIDs(t, s, k, Latest)
	n := footerEntries(s)
	if n < 5 || n > 6 || s.footers.bytes > s.footers.limit {
		t.Fatalf("%d footers of %d bytes kept, limit %d bytes: want 5 or 6 within the limit", n, s.footers.bytes, s.footers.limit)
	}
}

// TestFooterCacheRowBytes: the first read of a file measures the decoded
// size of a row of the columns it reads (decoding a few rows twice); the
// cache keeps it with the file's footer, per projection, so the next read
// of the same columns sizes its batches alike without measuring, and a
// read of other columns measures its own.
func TestFooterCacheRowBytes(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"rb"}
	vals := make([]int64, 5000)
	for i := range vals {
		vals[i] = int64(i)
	}
	rec := put(t, s, ModeWrite, k, ids(vals...), PutOptions{})
	batches := func() []int64 {
		rdr, err := s.Read(t.Context(), k, ReadOptions{BatchBytes: 8 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer rdr.Release()
		var n []int64
		for rdr.Next() {
			n = append(n, rdr.RecordBatch().NumRows())
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := batches()
	if len(first) < 2 {
		t.Fatalf("batches %v: want several of 8 KiB", first)
	}
	st, err := os.Stat(filepath.Join(dir, "rb", filepath.FromSlash(rec.Files[0].Path)))
	if err != nil {
		t.Fatal(err)
	}
	s.footers.mu.Lock()
	var kept map[string]float64
	for key, e := range s.footers.m {
		if strings.HasPrefix(key, "rb/"+rec.Files[0].Path+"\x00") {
			kept = maps.Clone(e.Value.(*footerEntry).rowBytes)
		}
	}
	s.footers.mu.Unlock()
	if rb := kept["id"]; rb < 8 || rb > 9 || len(kept) != 1 {
		t.Fatalf("row sizes kept %v for a file of %d bytes, want id's, 8 bytes a row", kept, st.Size())
	}
	if again := batches(); !slices.Equal(again, first) {
		t.Fatalf("batches %v on the second read, %v on the first", again, first)
	}
}
