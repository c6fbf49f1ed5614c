package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// makeLegacy turns a profile into what Quiver wrote before the commit log:
// each record as vN/.<index>.commit.json (no seq, no prev), no .log, no
// kind marker, and a .requests directory of old request records.
func makeLegacy(t *testing.T, s *Store, dir string, keys []string) {
	t.Helper()
	pdir := filepath.Join(append([]string{dir}, keys...)...)
	var recs []*CommitRecord
	if err := s.Lineage(context.Background(), keys, func(c *CommitRecord) error { recs = append(recs, c); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, c := range recs {
		old := *c
		old.Seq, old.Prev, old.Signer, old.Sig = 0, "", "", ""
		b, err := json.MarshalIndent(&old, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pdir, c.Version, legacyRecordName(c.Index)), b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{logDir, kindName} {
		if err := os.RemoveAll(filepath.Join(pdir, p)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(pdir, legacyRequestsDir, "0123abcd.json"), `{"request_id":"old"}`, 0)
}

// TestLegacyDataDir: a data directory written before the commit log (its
// records in .<i>.commit.json files) is served as it was: its records
// vouch for its files (size and rows checked on read), lineage lists them
// first, and new commits continue it in the log.
func TestLegacyDataDir(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	k := []string{"old"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{SchemaVersion: "1.0.0"})
	put(t, s, ModeAppend, k, ids(2), PutOptions{})
	put(t, s, ModeWrite, k, ids(3), PutOptions{SchemaVersion: "1.0.0"})
	kp := []string{"oldparts"}
	put(t, s, ModeWrite, kp, fromJSON(t, regionSchema, `[{"id":1,"region":"eu"},{"id":2,"region":"us"}]`), PutOptions{PartitionBy: []string{"region"}})
	put(t, s, ModeAppend, kp, fromJSON(t, regionSchema, `[{"id":3,"region":"eu"}]`), PutOptions{})
	makeLegacy(t, s, dir, k)
	makeLegacy(t, s, dir, kp)

	ls, err := Open(dir, WithVerifyReads(true))
	if err != nil {
		t.Fatal(err)
	}
	if got := readIDs(t, ls, k, Latest); fmt.Sprint(got) != "[3]" {
		t.Fatalf("latest %v", got)
	}
	if got := readIDs(t, ls, k, 0); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("v0 %v", got)
	}
	if _, rows := readAll(t, ls, kp, latest); sortedRows(t, rows) != sortedRows(t, `[{"id":1,"region":"eu"},{"id":2,"region":"us"},{"id":3,"region":"eu"}]`) {
		t.Fatalf("partitioned legacy profile: %s", rows)
	}
	var lin []string
	lineage := func() string {
		lin = lin[:0]
		if err := ls.Lineage(ctx, k, func(c *CommitRecord) error {
			lin = append(lin, fmt.Sprintf("%s/%d/%s/%d", c.Version, c.Index, c.Mode, c.Seq))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lin, " ")
	}
	if got := lineage(); got != "v0/0/write/0 v0/1/append/0 v1/0/write/0" {
		t.Fatalf("legacy lineage %s", got)
	}
	for _, keys := range [][]string{k, kp} {
		in, err := ls.Inspect(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if len(in.LogProblems)+len(in.Unknown)+len(in.Temps)+len(in.Links) > 0 || len(in.Log) != 0 {
			t.Fatalf("inspect legacy %v: %+v", keys, in)
		}
		for _, vs := range in.Versions {
			if !vs.Committed || vs.Legacy == 0 || vs.Legacy != len(vs.Records) || len(vs.Orphans)+len(vs.Unrecorded)+len(vs.Unknown) > 0 {
				t.Fatalf("legacy %v %s: %+v", keys, VersionName(vs.Version), vs)
			}
			for _, f := range vs.Files {
				if !f.Recorded {
					t.Fatalf("legacy %v: %s not vouched for by its record", keys, f.Path)
				}
			}
		}
	}

	// Legacy records vouch for their files: a truncated one is data loss.
	f0 := filepath.Join(dir, "old", "v0", "1.parquet")
	orig, _ := os.ReadFile(f0)
	if err := os.Chmod(f0, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f0, orig[:len(orig)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.Read(ctx, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 0}}); err == nil {
		rdr, _ := ls.Read(ctx, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 0}})
		for rdr.Next() {
		}
		err = rdr.Err()
		rdr.Release()
		if !errors.Is(err, ErrDataLoss) {
			t.Fatalf("truncated legacy file: %v", err)
		}
	} else if !errors.Is(err, ErrDataLoss) {
		t.Fatalf("truncated legacy file: %v", err)
	}
	if err := os.WriteFile(f0, orig, 0o444); err != nil {
		t.Fatal(err)
	}

	// The first commit takes the three old records into the log (chained,
	// marked adopted) and continues it: next free index, then seq 4.
	c := put(t, ls, ModeAppend, k, ids(4), PutOptions{})
	if c.Version != "v1" || c.Index != 1 || c.Seq != 4 || c.Prev == "" {
		t.Fatalf("append to a legacy version: %+v", c)
	}
	w := put(t, ls, ModeWrite, k, ids(5), PutOptions{})
	if w.Version != "v2" || w.Seq != 5 || w.Prev != c.Hash() {
		t.Fatalf("write after a legacy version: %+v", w)
	}
	if got := readIDs(t, ls, k, 1); fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("v1 after append %v", got)
	}
	if got := lineage(); got != "v0/0/write/1 v0/1/append/2 v1/0/write/3 v1/1/append/4 v2/0/write/5" {
		t.Fatalf("lineage %s", got)
	}
	// Retention retires a legacy version like any other.
	if out := retireAllButLatest(t, ls, k); fmt.Sprint(out) != "[v0 v1]" {
		t.Fatalf("retired %v", out)
	}
	if _, err := ls.Read(ctx, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: 0}}); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("read of a retired legacy version: %v", err)
	}
	auditClean(t, ls, dir, k)

	// A legacy record that does not parse is corruption, named by path.
	p1 := filepath.Join(dir, "oldparts", "v0", legacyRecordName(1))
	if err := os.Chmod(p1, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p1, `{"version":"v0","index":1,`, 0)
	_, err = ls.Read(ctx, kp, latest)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != "oldparts/v0/.1.commit.json" || strings.Contains(err.Error(), dir) {
		t.Fatalf("corrupt legacy record: %v", err)
	}
}
