package store_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// TestLineageMultiProcess: 50 appends from 4 OS processes leave 50 append
// records after the write's, one hash chain in commit order, every file
// hashing as recorded, no index lost or taken twice; the NDJSON form is
// the log's own bytes, so the chain can be checked from the output alone.
func TestLineageMultiProcess(t *testing.T) {
	dir := t.TempDir()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := store.Open(dir, store.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := []string{"audit", "log"}
	r0 := mpBatch(-1, 0, 1)
	if _, err := s.Put(ctx, k, r0, store.PutOptions{Mode: store.ModeWrite}); err != nil {
		t.Fatal(err)
	}
	r0.Release()
	perProc := []int{12, 12, 13, 13}
	var procs []*helperProc
	for i, n := range perProc {
		procs = append(procs, startHelper(t, "append", dir, helperArgs{Keys: k, Writer: int64(i), N: n, Rows: 1, LockMS: 30000}))
	}
	for _, h := range procs {
		for a := range h.acks {
			if a.Err != "" {
				t.Errorf("writer %d seq %d: %s", a.Writer, a.Seq, a.Err)
			}
		}
		if err := <-h.done; err != nil {
			t.Fatalf("helper: %v\n%s", err, h.stderr())
		}
	}
	var recs []*store.CommitRecord
	if err := s.Lineage(ctx, k, func(c *store.CommitRecord) error {
		recs = append(recs, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 51 {
		t.Fatalf("%d records, want 51", len(recs))
	}
	if recs[0].Mode != store.ModeWrite || recs[0].Index != 0 {
		t.Fatalf("first record %+v", recs[0])
	}
	runIDs := map[string]bool{}
	perWriter := map[string]int{}
	var indices []int
	prev := ""
	for i, c := range recs {
		if c.Seq != int64(i+1) || c.Prev != prev || c.Version != "v0" {
			t.Fatalf("record %d: seq %d prev %.12s version %s (want %d, %.12s, v0)", i, c.Seq, c.Prev, c.Version, i+1, prev)
		}
		prev = c.Hash()
		indices = append(indices, c.Index)
		for _, f := range c.Files {
			if fileSHA256(t, filepath.Join(dir, "audit", "log", filepath.FromSlash(f.Path))) != f.SHA256 {
				t.Fatalf("%s: sha256 does not match the record", f.Path)
			}
		}
		if i == 0 {
			continue
		}
		var md struct {
			RunID string `json:"run_id"`
		}
		if err := json.Unmarshal(c.Metadata, &md); err != nil || md.RunID == "" {
			t.Fatalf("record %d metadata %s", i, c.Metadata)
		}
		runIDs[md.RunID] = true
		perWriter[c.Writer]++
	}
	// Commit order need not be index order across processes, but every
	// index 0..50 is taken exactly once.
	sort.Ints(indices)
	for i, idx := range indices {
		if idx != i {
			t.Fatalf("indices %v: not 0..50 each once", indices)
		}
	}
	if len(runIDs) != 50 {
		t.Fatalf("%d distinct run ids, want 50", len(runIDs))
	}
	for i, n := range perProc {
		if w := fmt.Sprintf("helper-append-%d", i); perWriter[w] != n {
			t.Fatalf("writer %s: %d records, want %d", w, perWriter[w], n)
		}
	}
	// The NDJSON form: the log's lines, chained, checkable alone.
	var buf bytes.Buffer
	if err := s.WriteLineage(ctx, &buf, k); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	n := 0
	prevLine := ""
	for sc.Scan() {
		line := sc.Text()
		if line != string(recs[n].Line()) {
			t.Fatalf("line %d is not the stored record", n)
		}
		c, err := store.ParseCommitRecord([]byte(line))
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if n > 0 && c.Prev != sha256Hex([]byte(prevLine)) {
			t.Fatalf("line %d does not chain to line %d", n, n-1)
		}
		prevLine = line
		n++
	}
	if n != 51 {
		t.Fatalf("%d NDJSON lines", n)
	}
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{Keys: k})
	if err != nil || !rep.OK || rep.CheckedFiles != 51 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if len(rep.Heads) != 1 || rep.Heads[0].Seq != 51 || rep.Heads[0].Hash != sha256Hex([]byte(prevLine)) || rep.Heads[0].Path != "audit/log" {
		t.Fatalf("chain head %+v", rep.Heads)
	}
}

// TestLineageOrderAcrossVersions: the lineage is the log in commit order
// across versions, retirements included; a signed log verifies from the
// lineage output alone.
func TestLineageOrderAcrossVersions(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := store.Open(t.TempDir(), store.WithSigningKey(priv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k := []string{"a"}
	for i, m := range []store.Mode{store.ModeWrite, store.ModeAppend, store.ModeWrite, store.ModeAppend} {
		r := mpBatch(0, int64(i), 1)
		if _, err := s.Put(ctx, k, r, store.PutOptions{Mode: m}); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	rep, err := maint.RemoveOldVersions(ctx, s, k, 1, 0, "retention-job")
	if err != nil || fmt.Sprint(rep.Removed) != "[v0]" {
		t.Fatalf("retention %+v %v", rep, err)
	}
	var got []string
	err = s.Lineage(ctx, k, func(c *store.CommitRecord) error {
		got = append(got, fmt.Sprintf("%s/%d/%s", c.Version, c.Index, c.Mode))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[v0/0/write v0/1/append v1/0/write v1/1/append v0/0/retire]" {
		t.Fatalf("got %v", got)
	}
	var buf bytes.Buffer
	if err := s.WriteLineage(ctx, &buf, k); err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
		c, err := store.ParseCommitRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.VerifySignature(pub); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if c.Mode == store.ModeRetire && (c.Writer != "retention-job" || len(c.Files) != 0) {
			t.Fatalf("retire record %s", line)
		}
	}
	// A stopping callback stops the walk with its error.
	stop := errors.New("stop")
	calls := 0
	if err := s.Lineage(ctx, k, func(*store.CommitRecord) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("stop: %v after %d calls", err, calls)
	}
	if err := s.Lineage(ctx, []string{"missing"}, func(*store.CommitRecord) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lineage of a missing profile: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Lineage(cctx, k, func(*store.CommitRecord) error { return nil }); err == nil {
		t.Fatal("lineage with a cancelled context succeeded")
	}
}
