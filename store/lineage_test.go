package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestLineageMultiProcess: 50 appends from 4 OS processes leave 50 append
// records (plus the write's), every file hashing as recorded, none lost.
func TestLineageMultiProcess(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"audit", "log"}
	put(t, s, ModeWrite, k, ids(-1), PutOptions{})
	perProc := []int{12, 12, 13, 13}
	var procs []*auditProc
	for i, n := range perProc {
		procs = append(procs, startAuditHelper(t, "append", dir, k,
			fmt.Sprintf("%s=%d", auditEnvN, n), fmt.Sprintf("%s=w%d", auditEnvWriter, i)))
	}
	for _, h := range procs {
		h.wait(t)
	}
	var recs []*CommitRecord
	if err := s.Lineage(context.Background(), k, func(c *CommitRecord) error {
		recs = append(recs, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 51 {
		t.Fatalf("%d records, want 51", len(recs))
	}
	if recs[0].Mode != ModeWrite || recs[0].Index != 0 {
		t.Fatalf("first record %+v", recs[0])
	}
	runIDs := map[string]bool{}
	perWriter := map[string]int{}
	for i, c := range recs {
		if c.Index != i || c.Version != "v0" {
			t.Fatalf("record %d: version %s index %d (commit order broken or index lost)", i, c.Version, c.Index)
		}
		for _, f := range c.Files {
			b, err := os.ReadFile(filepath.Join(dir, "audit", "log", filepath.FromSlash(f.Path)))
			if err != nil {
				t.Fatal(err)
			}
			if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != f.SHA256 || int64(len(b)) != f.Bytes {
				t.Fatalf("%s: sha256/size do not match the record", f.Path)
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
	if len(runIDs) != 50 {
		t.Fatalf("%d distinct run ids, want 50", len(runIDs))
	}
	for i, n := range perProc {
		if w := fmt.Sprintf("w%d", i); perWriter[w] != n {
			t.Fatalf("writer %s: %d records, want %d", w, perWriter[w], n)
		}
	}
	// The NDJSON form: one record per line, the same records.
	var buf bytes.Buffer
	if err := s.WriteLineage(context.Background(), &buf, k); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	n := 0
	for sc.Scan() {
		c, err := ParseCommitRecord(sc.Bytes())
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if c.Index != recs[n].Index || c.Files[0].SHA256 != recs[n].Files[0].SHA256 {
			t.Fatalf("line %d differs", n)
		}
		n++
	}
	if n != 51 {
		t.Fatalf("%d NDJSON lines", n)
	}
	rep, err := s.Verify(context.Background(), VerifyOptions{Keys: k})
	if err != nil || !rep.OK || rep.CheckedFiles != 51 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func TestLineageOrderAcrossVersions(t *testing.T) {
	s, _ := newTestStore(t)
	k := []string{"a"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeAppend, k, ids(2), PutOptions{})
	put(t, s, ModeWrite, k, ids(3), PutOptions{})
	put(t, s, ModeAppend, k, ids(4), PutOptions{})
	var got []string
	err := s.Lineage(context.Background(), k, func(c *CommitRecord) error {
		got = append(got, fmt.Sprintf("%s/%d/%s", c.Version, c.Index, c.Mode))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[v0/0/write v0/1/append v1/0/write v1/1/append]" {
		t.Fatalf("got %v", got)
	}
	if err := s.Lineage(context.Background(), []string{"missing"}, func(*CommitRecord) error { return nil }); err == nil {
		t.Fatal("lineage of a missing profile succeeded")
	}
}
