package maint_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/maint"
)

const (
	orders = "sales/orders"
	parts  = "sales/parts"
)

func segPath(dir, prof string, seq int64) string {
	return filepath.Join(dir, filepath.FromSlash(prof), ".log", fmt.Sprintf("%020d.ndjson", seq))
}

func hexSHA(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// rewriteRecord replaces old by new in the line of record seq (a tamperer
// with write access to the storage).
func rewriteRecord(t *testing.T, dir, prof string, seq int64, old, new string) {
	t.Helper()
	p := segPath(dir, prof, seq)
	b := string(readFile(t, p))
	if !strings.Contains(b, old) {
		t.Fatalf("record %d lacks %q", seq, old)
	}
	writeFile(t, p, strings.Replace(b, old, new, 1), 0)
}

// rechain recomputes every prev after record from and .log/HEAD, as a
// tamperer who knows the format would after rewriting record from: the
// chain is whole again, only signatures (or a head published elsewhere)
// can tell.
func rechain(t *testing.T, dir, prof string, from, last int64) {
	t.Helper()
	prevHash := hexSHA([]byte(strings.TrimSuffix(string(readFile(t, segPath(dir, prof, from))), "\n")))
	for seq := from + 1; seq <= last; seq++ {
		p := segPath(dir, prof, seq)
		line := strings.TrimSuffix(string(readFile(t, p)), "\n")
		c, err := store.ParseCommitRecord([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		line = strings.Replace(line, `"prev":"`+c.Prev+`"`, `"prev":"`+prevHash+`"`, 1)
		writeFile(t, p, line+"\n", 0)
		prevHash = hexSHA([]byte(line))
	}
	b, _ := json.Marshal(map[string]any{"seq": last, "hash": prevHash})
	writeFile(t, filepath.Join(dir, filepath.FromSlash(prof), ".log", "HEAD"), string(b), 0)
}

// sameSizeParquet writes scratch profiles until one's only file is a valid
// Parquet file of exactly size bytes that differs from the content of want.
func sameSizeParquet(t *testing.T, s *store.Store, dir string, size int64, want []byte) string {
	t.Helper()
	for v := int64(100); v < 200; v++ {
		keys := []string{"scratch", fmt.Sprintf("p%d", v)}
		put(t, s, store.ModeWrite, keys, ids(v), store.PutOptions{SchemaVersion: "1.0.0"})
		p := filepath.Join(dir, "scratch", keys[1], "v0", "0.parquet")
		b := readFile(t, p)
		if int64(len(b)) == size && string(b) != string(want) {
			return p
		}
	}
	t.Fatal("no same-size Parquet file found")
	return ""
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyTamper: each way of altering a data directory behind Quiver's
// back, and exactly the problems Verify must report for it; then what
// Sweep(0) does with it: it never removes a committed file, never follows
// or removes a link or an unknown entry, and leaves a profile whose chain
// is broken entirely alone.
func TestVerifyTamper(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, s *store.Store, dir string)
		want   []string // "kind path", sorted; nil for a clean store
	}{
		{"clean", func(*testing.T, *store.Store, string) {}, nil},
		{"flip one byte", func(t *testing.T, _ *store.Store, dir string) {
			p := filepath.Join(dir, orders, "v0", "1.parquet")
			b := readFile(t, p)
			b[len(b)/2] ^= 0x01
			writeFile(t, p, string(b), 0)
		}, []string{"mutated " + orders + "/v0/1.parquet"}},
		{"truncate", func(t *testing.T, _ *store.Store, dir string) {
			p := filepath.Join(dir, orders, "v0", "0.parquet")
			writeFile(t, p, string(readFile(t, p)[:10]), 0)
		}, []string{"mutated " + orders + "/v0/0.parquet"}},
		{"delete a data file", func(t *testing.T, _ *store.Store, dir string) {
			if err := os.Remove(filepath.Join(dir, orders, "v0", "2.parquet")); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing " + orders + "/v0/2.parquet"}},
		{"delete a partition file", func(t *testing.T, _ *store.Store, dir string) {
			if err := os.Remove(filepath.Join(dir, parts, "v0", "region=us", "0.parquet")); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing " + parts + "/v0/region=us/0.parquet"}},
		{"replace with a valid Parquet file of the same size", func(t *testing.T, s *store.Store, dir string) {
			p := filepath.Join(dir, orders, "v0", "1.parquet")
			old := readFile(t, p)
			copyFile(t, sameSizeParquet(t, s, dir, int64(len(old)), old), p)
			if err := os.RemoveAll(filepath.Join(dir, "scratch")); err != nil {
				t.Fatal(err)
			}
		}, []string{"mutated " + orders + "/v0/1.parquet"}},
		{"delete a log segment in the middle", func(t *testing.T, _ *store.Store, dir string) {
			if err := os.Remove(segPath(dir, orders, 2)); err != nil {
				t.Fatal(err)
			}
		}, []string{"chain_broken " + orders + "/.log", "orphan " + orders + "/v0/1.parquet"}},
		// Red team round 20's u01: the intact record before the damage is
		// still read, so the file it lists, altered, is mutated, not an
		// orphan; a torn or foreign line after it the same.
		{"a blank line after an intact record, and its file altered", func(t *testing.T, _ *store.Store, dir string) {
			seg := segPath(dir, orders, 2)
			writeFile(t, seg, string(readFile(t, seg))+"\n", 0)
			p := filepath.Join(dir, orders, "v0", "1.parquet")
			b := readFile(t, p)
			b[len(b)/2] ^= 0x01
			writeFile(t, p, string(b), 0)
		}, []string{"chain_broken " + orders + "/.log", "mutated " + orders + "/v0/1.parquet"}},
		{"a torn line after an intact record", func(t *testing.T, _ *store.Store, dir string) {
			seg := segPath(dir, orders, 2)
			writeFile(t, seg, string(readFile(t, seg))+`{"seq":3,"pa`, 0)
		}, []string{"chain_broken " + orders + "/.log"}},
		// Red team round 21's v02: a segment over the size a metadata file
		// is read up to stopped the audit of the whole profile.
		{"a segment too large to read, and another segment's file altered", func(t *testing.T, _ *store.Store, dir string) {
			seg := segPath(dir, orders, 2)
			writeFile(t, seg, string(readFile(t, seg))+strings.Repeat("x", int(fsys.MaxReadFile))+"\n", 0)
			p := filepath.Join(dir, orders, "v0", "0.parquet")
			b := readFile(t, p)
			b[len(b)/2] ^= 0x01
			writeFile(t, p, string(b), 0)
		}, []string{"chain_broken " + orders + "/.log", "mutated " + orders + "/v0/0.parquet", "orphan " + orders + "/v0/1.parquet"}},
		{"a garbled first line", func(t *testing.T, _ *store.Store, dir string) {
			seg := segPath(dir, orders, 2)
			writeFile(t, seg, "x"+string(readFile(t, seg)), 0)
		}, []string{"chain_broken " + orders + "/.log", "orphan " + orders + "/v0/1.parquet"}},
		{"delete the last log segment", func(t *testing.T, _ *store.Store, dir string) {
			if err := os.Remove(segPath(dir, orders, 3)); err != nil {
				t.Fatal(err)
			}
		}, []string{"chain_broken " + orders + "/.log", "orphan " + orders + "/v0/2.parquet"}},
		{"delete the last segment and HEAD", func(t *testing.T, _ *store.Store, dir string) {
			for _, p := range []string{segPath(dir, orders, 3), filepath.Join(dir, orders, ".log", "HEAD")} {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"chain_broken " + orders + "/.log", "orphan " + orders + "/v0/2.parquet"}},
		{"delete HEAD", func(t *testing.T, _ *store.Store, dir string) {
			if err := os.Remove(filepath.Join(dir, orders, ".log", "HEAD")); err != nil {
				t.Fatal(err)
			}
		}, []string{"chain_broken " + orders + "/.log"}},
		{"rewrite a record in the middle", func(t *testing.T, _ *store.Store, dir string) {
			rewriteRecord(t, dir, orders, 2, `"writer":"`, `"writer":"X`)
		}, []string{"chain_broken " + orders + "/.log"}},
		{"rewrite the last record", func(t *testing.T, _ *store.Store, dir string) {
			rewriteRecord(t, dir, orders, 3, `"writer":"`, `"writer":"X`)
		}, []string{"chain_broken " + orders + "/.log"}},
		{"reorder two records", func(t *testing.T, _ *store.Store, dir string) {
			a, b := readFile(t, segPath(dir, orders, 2)), readFile(t, segPath(dir, orders, 3))
			writeFile(t, segPath(dir, orders, 2), string(b), 0)
			writeFile(t, segPath(dir, orders, 3), string(a), 0)
		}, []string{"chain_broken " + orders + "/.log", "orphan " + orders + "/v0/1.parquet", "orphan " + orders + "/v0/2.parquet"}},
		{"a foreign file in the log", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, orders, ".log", "notes.txt"), "x", 0)
		}, []string{"chain_broken " + orders + "/.log", "unknown " + orders + "/.log/notes.txt"}},
		{"unlisted file under a partition", func(t *testing.T, _ *store.Store, dir string) {
			copyFile(t, filepath.Join(dir, parts, "v0", "region=eu", "0.parquet"), filepath.Join(dir, parts, "v0", "region=eu", "7.parquet"))
		}, []string{"orphan " + parts + "/v0/region=eu/7.parquet"}},
		{"numbered file at a version root (pyrosome's)", func(t *testing.T, _ *store.Store, dir string) {
			copyFile(t, filepath.Join(pyrosomeFixture, "events", "v0", "1.parquet"), filepath.Join(dir, orders, "v0", "9.parquet"))
		}, []string{"unrecorded " + orders + "/v0/9.parquet"}},
		{"Quiver file at a version root without its record", func(t *testing.T, _ *store.Store, dir string) {
			copyFile(t, filepath.Join(dir, orders, "v0", "1.parquet"), filepath.Join(dir, orders, "v0", "9.parquet"))
		}, []string{"orphan " + orders + "/v0/9.parquet"}},
		{"garbage numbered file at a version root, and a flipped byte", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, orders, "v0", "9.parquet"), "not parquet", 0)
			p := filepath.Join(dir, orders, "v0", "1.parquet")
			b := readFile(t, p)
			b[len(b)/2] ^= 0x01
			writeFile(t, p, string(b), 0)
		}, []string{"mutated " + orders + "/v0/1.parquet", "unrecorded " + orders + "/v0/9.parquet"}},
		{"symlink in a version", func(t *testing.T, _ *store.Store, dir string) {
			symlink(t, "/etc", filepath.Join(dir, orders, "v0", "notes"))
		}, []string{"link " + orders + "/v0/notes"}},
		{"symlink named as a data file", func(t *testing.T, _ *store.Store, dir string) {
			symlink(t, "0.parquet", filepath.Join(dir, orders, "v0", "8.parquet"))
		}, []string{"link " + orders + "/v0/8.parquet"}},
		{"symlink in a partition", func(t *testing.T, _ *store.Store, dir string) {
			symlink(t, "../region=us/0.parquet", filepath.Join(dir, parts, "v0", "region=eu", "5.parquet"))
		}, []string{"link " + parts + "/v0/region=eu/5.parquet"}},
		{"symlink in a profile", func(t *testing.T, _ *store.Store, dir string) {
			symlink(t, "/tmp", filepath.Join(dir, orders, "v9"))
		}, []string{"link " + orders + "/v9"}},
		{"symlink in the log", func(t *testing.T, _ *store.Store, dir string) {
			symlink(t, "00000000000000000001.ndjson", filepath.Join(dir, orders, ".log", "00000000000000000004.ndjson"))
		}, []string{"link " + orders + "/.log/00000000000000000004.ndjson"}},
		{"symlink at the data dir's root", func(t *testing.T, _ *store.Store, dir string) {
			symlink(t, "/", filepath.Join(dir, "evil"))
		}, []string{"link evil"}},
		{"unknown files", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, orders, "v0", "notes.txt"), "x", 0)
			writeFile(t, filepath.Join(dir, orders, "README"), "x", 0)
			writeFile(t, filepath.Join(dir, parts, "v0", "region=eu", "x.txt"), "x", 0)
		}, []string{"unknown " + orders + "/README", "unknown " + orders + "/v0/notes.txt", "unknown " + parts + "/v0/region=eu/x.txt"}},
		{"stale temp", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, parts, "v0", "region=eu", ".0123.parquet.tmp"), "half", 2*time.Hour)
			// A fresh temp is a writer at work, not a problem.
			writeFile(t, filepath.Join(dir, orders, "v0", ".fresh.parquet.tmp"), "", 0)
		}, []string{"stale_temp " + parts + "/v0/region=eu/.0123.parquet.tmp"}},
		{"stale lock of a dead owner", func(t *testing.T, _ *store.Store, dir string) {
			host, _ := os.Hostname()
			b, _ := json.Marshal(store.Owner{Host: host, PID: deadPID(t), Time: time.Now()})
			writeFile(t, filepath.Join(dir, orders, "manifest.json.write_lock"), string(b), 0)
		}, []string{"stale_lock " + orders + "/manifest.json.write_lock"}},
		{"abandoned version", func(t *testing.T, _ *store.Store, dir string) {
			p := filepath.Join(dir, orders, "v5")
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			touchOld(t, p, 2*time.Hour)
		}, []string{"orphan " + orders + "/v5"}},
		{"corrupt manifest", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, orders, "manifest.json"), `{"latest_data_dir": "v`, 0)
		}, []string{"mutated " + orders + "/manifest.json"}},
		{"corrupt manifest and a deleted file", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, orders, "manifest.json"), `{"latest_data_dir": "v`, 0)
			if err := os.Remove(filepath.Join(dir, orders, "v0", "2.parquet")); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing " + orders + "/v0/2.parquet", "mutated " + orders + "/manifest.json"}},
		// One damaged file never blinds the audit to the rest: a version
		// whose .version.json is changed, gone or unparsable still has
		// every file its records list checked, and every other version
		// and profile is checked too (red team round 19, t03).
		{".version.json of an old version edited, with other tampers", func(t *testing.T, s *store.Store, dir string) {
			put(t, s, store.ModeWrite, strings.Split(orders, "/"), ids(9, 10), store.PutOptions{SchemaVersion: "1.0.0"})
			editJSON(t, filepath.Join(dir, orders, "v0", ".version.json"), "writer", "someone else")
			flip(t, filepath.Join(dir, orders, "v1", "0.parquet"))
			remove(t, filepath.Join(dir, orders, "v0", "2.parquet"))
			remove(t, filepath.Join(dir, parts, "v0", "region=us", "0.parquet"))
		}, []string{"missing " + orders + "/v0/2.parquet", "missing " + parts + "/v0/region=us/0.parquet", "mutated " + orders + "/v0/.version.json", "mutated " + orders + "/v1/0.parquet"}},
		{".version.json of the latest version edited, and a flipped byte in it", func(t *testing.T, _ *store.Store, dir string) {
			editJSON(t, filepath.Join(dir, orders, "v0", ".version.json"), "writer", "someone else")
			flip(t, filepath.Join(dir, orders, "v0", "1.parquet"))
		}, []string{"mutated " + orders + "/v0/.version.json", "mutated " + orders + "/v0/1.parquet"}},
		{".version.json of an old version deleted, and a flipped byte in it", func(t *testing.T, s *store.Store, dir string) {
			put(t, s, store.ModeWrite, strings.Split(orders, "/"), ids(9, 10), store.PutOptions{SchemaVersion: "1.0.0"})
			remove(t, filepath.Join(dir, orders, "v0", ".version.json"))
			flip(t, filepath.Join(dir, orders, "v0", "0.parquet"))
		}, []string{"missing " + orders + "/v0/.version.json", "mutated " + orders + "/v0/0.parquet"}},
		{".version.json that does not parse, a deleted file and a stale temp", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, orders, "v0", ".version.json"), `{"version": "v0", "sche`, 0)
			remove(t, filepath.Join(dir, orders, "v0", "1.parquet"))
			writeFile(t, filepath.Join(dir, orders, "v0", ".0123.parquet.tmp"), "half", 2*time.Hour)
		}, []string{"missing " + orders + "/v0/1.parquet", "mutated " + orders + "/v0/.version.json", "stale_temp " + orders + "/v0/.0123.parquet.tmp"}},
		{".version.json replaced by a directory, and a truncated file", func(t *testing.T, _ *store.Store, dir string) {
			p := filepath.Join(dir, orders, "v0", ".version.json")
			remove(t, p)
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			p = filepath.Join(dir, orders, "v0", "2.parquet")
			writeFile(t, p, string(readFile(t, p)[:10]), 0)
		}, []string{"mutated " + orders + "/v0/.version.json", "mutated " + orders + "/v0/2.parquet"}},
		{"partitioned .version.json edited, an orphan in a partition and a flipped byte", func(t *testing.T, _ *store.Store, dir string) {
			editJSON(t, filepath.Join(dir, parts, "v0", ".version.json"), "writer", "someone else")
			copyFile(t, filepath.Join(dir, parts, "v0", "region=eu", "0.parquet"), filepath.Join(dir, parts, "v0", "region=eu", "7.parquet"))
			flip(t, filepath.Join(dir, parts, "v0", "region=us", "0.parquet"))
		}, []string{"mutated " + parts + "/v0/.version.json", "mutated " + parts + "/v0/region=us/0.parquet", "orphan " + parts + "/v0/region=eu/7.parquet"}},
		{"a CSV file planted in a Parquet version, and a flipped byte", func(t *testing.T, _ *store.Store, dir string) {
			writeFile(t, filepath.Join(dir, orders, "v0", "9.csv"), "id\n1\n", 0)
			flip(t, filepath.Join(dir, orders, "v0", "0.parquet"))
		}, []string{"mutated " + orders + "/v0", "mutated " + orders + "/v0/0.parquet", "unrecorded " + orders + "/v0/9.csv"}},
		{"a log segment replaced by a FIFO, and a flipped byte", func(t *testing.T, _ *store.Store, dir string) {
			remove(t, segPath(dir, orders, 2))
			mkfifo(t, segPath(dir, orders, 2))
			flip(t, filepath.Join(dir, orders, "v0", "0.parquet"))
		}, []string{"chain_broken " + orders + "/.log", "mutated " + orders + "/v0/0.parquet", "orphan " + orders + "/v0/1.parquet"}},
		{"manifest deleted, and a flipped byte", func(t *testing.T, _ *store.Store, dir string) {
			remove(t, filepath.Join(dir, orders, "manifest.json"))
			flip(t, filepath.Join(dir, orders, "v0", "0.parquet"))
		}, []string{"missing " + orders + "/manifest.json", "mutated " + orders + "/v0/0.parquet"}},
		{"manifest replaced by a directory, and a deleted file", func(t *testing.T, _ *store.Store, dir string) {
			p := filepath.Join(dir, orders, "manifest.json")
			remove(t, p)
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			remove(t, filepath.Join(dir, orders, "v0", "1.parquet"))
		}, []string{"missing " + orders + "/v0/1.parquet", "mutated " + orders + "/manifest.json"}},
		{"lock replaced by a FIFO, and a flipped byte", func(t *testing.T, _ *store.Store, dir string) {
			mkfifo(t, filepath.Join(dir, orders, "manifest.json.write_lock"))
			flip(t, filepath.Join(dir, orders, "v0", "2.parquet"))
		}, []string{"mutated " + orders + "/v0/2.parquet", "unknown " + orders + "/manifest.json.write_lock"}},
		{"what is left of a retired version", func(t *testing.T, s *store.Store, dir string) {
			keys := strings.Split(orders, "/")
			put(t, s, store.ModeWrite, keys, ids(9), store.PutOptions{SchemaVersion: "1.0.0"})
			rep, err := maint.RemoveOldVersions(context.Background(), s, keys, 1, 0, "")
			if err != nil || len(rep.Removed) != 1 {
				t.Fatalf("retention: %+v %v", rep, err)
			}
			copyFile(t, filepath.Join(dir, parts, "v0", "region=eu", "0.parquet"), filepath.Join(dir, orders, "v0", "0.parquet"))
		}, []string{"orphan " + orders + "/v0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newStore(t)
			auditFixture(t, s)
			ctx := context.Background()
			// The files the intact log lists, before the tamper.
			committed := map[string]bool{}
			for _, prof := range []string{orders, parts} {
				if err := s.Lineage(ctx, strings.Split(prof, "/"), func(r *store.CommitRecord) error {
					for _, f := range r.Files {
						committed[prof+"/"+f.Path] = true
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			c.tamper(t, s, dir)
			// Retention may retire a version on purpose: its files are no
			// longer committed.
			for _, prof := range []string{orders, parts} {
				_ = s.Lineage(ctx, strings.Split(prof, "/"), func(r *store.CommitRecord) error {
					if r.Mode == store.ModeRetire {
						for name := range committed {
							if strings.HasPrefix(name, prof+"/"+r.Version+"/") {
								delete(committed, name)
							}
						}
					}
					return nil
				})
			}
			rep, err := maint.Verify(ctx, s, maint.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := problems(rep.Problems)
			if c.want == nil {
				if !rep.OK || len(rep.Problems) != 0 || rep.CheckedFiles != 6 || len(rep.Heads) != 2 {
					t.Fatalf("clean store: %+v", rep)
				}
			} else if strings.Join(got, "\n") != strings.Join(c.want, "\n") || rep.OK {
				t.Errorf("verify found\n  %s\nwant\n  %s\n(%+v)", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "), rep.Problems)
			}
			chainBroken := slices.ContainsFunc(rep.Problems, func(p maint.Problem) bool { return p.Kind == maint.ProblemChain })
			for _, p := range rep.Problems {
				if p.Detail == "" {
					t.Errorf("%s %s without detail", p.Kind, p.Path)
				}
				// With the log damaged, a file no readable record lists
				// may be committed: it is not called a killed writer's
				// (red team round 20's u01).
				if chainBroken && p.Kind == maint.ProblemOrphan && strings.Contains(p.Detail, "writer died") {
					t.Errorf("%s %s: %q beside a broken chain", p.Kind, p.Path, p.Detail)
				}
			}
			b, _ := json.Marshal(rep)
			if strings.Contains(string(b), dir) {
				t.Errorf("report shows the server path: %s", b)
			}
			// The same problems when verifying just that profile.
			for _, prof := range []string{orders, parts} {
				one, err := maint.Verify(ctx, s, maint.VerifyOptions{Keys: strings.Split(prof, "/")})
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, w := range c.want {
					if strings.Contains(w, " "+prof+"/") {
						want = append(want, w)
					}
				}
				if g := problems(one.Problems); strings.Join(g, "\n") != strings.Join(want, "\n") {
					t.Errorf("verify %s found %v, want %v", prof, g, want)
				}
			}

			// Sweep(0): what it may remove, it removes; nothing committed,
			// no link, no unknown entry, and nothing at all in a profile
			// whose chain is broken.
			before := hashTree(t, dir)
			sw, err := maint.Sweep(ctx, s, 0)
			if err != nil {
				t.Fatal(err)
			}
			after := hashTree(t, dir)
			broken := map[string]bool{}
			for _, w := range c.want {
				if strings.HasPrefix(w, "chain_broken ") {
					broken[strings.TrimSuffix(strings.TrimPrefix(w, "chain_broken "), "/.log")] = true
				}
			}
			for prof := range broken {
				for name, h := range before {
					if strings.HasPrefix(name, prof+"/") && after[name] != h {
						t.Errorf("sweep changed %s in %s, whose chain is broken", name, prof)
					}
				}
				skipped := false
				for _, p := range sw.Skipped {
					if p.Kind == maint.ProblemChain && p.Path == prof {
						skipped = true
					}
				}
				if !skipped {
					t.Errorf("sweep did not report %s as skipped (chain broken): %+v", prof, sw.Skipped)
				}
			}
			for name := range committed {
				if _, was := before[name]; was && after[name] != before[name] {
					t.Errorf("sweep removed or changed committed %s", name)
				}
			}
			for _, w := range c.want {
				kind, p, _ := strings.Cut(w, " ")
				if (kind == maint.ProblemLink || kind == maint.ProblemUnknown) && after[p] != before[p] {
					t.Errorf("sweep touched %s (%s)", p, kind)
				}
			}
			for _, r := range sw.Removed {
				if committed[r] {
					t.Errorf("sweep removed committed %s", r)
				}
			}
		})
	}
}

// TestVerifySignatures: with a public key every record must carry a valid
// signature by its private key. A rewritten record fails its signature
// (and the chain); one whose chain a tamperer re-made fails only its
// signature — and changes the chain head an auditor published.
func TestVerifySignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	ctx := context.Background()
	cases := []struct {
		name   string
		signed bool
		key    ed25519.PublicKey
		tamper func(t *testing.T, dir string)
		want   []string
		// newHead: the tamper changed the last record, so the chain head
		// an auditor published before no longer matches.
		newHead bool
	}{
		{"signed, clean", true, pub, nil, nil, false},
		{"signed, another key", true, other, nil, []string{"bad_signature " + orders + "/.log", "bad_signature " + parts + "/.log"}, false},
		{"unsigned, verified with a key", false, pub, nil, []string{"bad_signature " + orders + "/.log", "bad_signature " + parts + "/.log"}, false},
		{"unsigned, no key", false, nil, nil, nil, false},
		{"signed, a record rewritten", true, pub, func(t *testing.T, dir string) {
			rewriteRecord(t, dir, orders, 2, `"writer":"`, `"writer":"X`)
		}, []string{"bad_signature " + orders + "/.log", "chain_broken " + orders + "/.log"}, false},
		{"signed, a record rewritten and the chain re-made", true, pub, func(t *testing.T, dir string) {
			rewriteRecord(t, dir, orders, 2, `"writer":"`, `"writer":"X`)
			rechain(t, dir, orders, 2, 3)
		}, []string{"bad_signature " + orders + "/.log"}, true},
		{"signed, the signature moved to another record", true, pub, func(t *testing.T, dir string) {
			c2, _ := store.ParseCommitRecord(readFile(t, segPath(dir, orders, 2)))
			c3, _ := store.ParseCommitRecord(readFile(t, segPath(dir, orders, 3)))
			rewriteRecord(t, dir, orders, 3, c3.Sig, c2.Sig)
			rechain(t, dir, orders, 3, 3)
		}, []string{"bad_signature " + orders + "/.log"}, true},
		{"signed, another profile's signed history copied over this one", true, pub, func(t *testing.T, dir string) {
			// Red team F22: records name their profile, under the signature.
			o := filepath.Join(dir, filepath.FromSlash(orders))
			if err := os.RemoveAll(o); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(o, os.DirFS(filepath.Join(dir, filepath.FromSlash(parts)))); err != nil {
				t.Fatal(err)
			}
		}, []string{"chain_broken " + orders + "/.log"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var opts []store.Option
			if c.signed {
				opts = append(opts, store.WithSigningKey(priv))
			}
			s, dir := newStore(t, opts...)
			auditFixture(t, s)
			clean, err := maint.Verify(ctx, s, maint.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.tamper != nil {
				c.tamper(t, dir)
			}
			rep, err := maint.Verify(ctx, s, maint.VerifyOptions{PublicKey: c.key})
			if err != nil {
				t.Fatal(err)
			}
			if got := problems(rep.Problems); strings.Join(got, "\n") != strings.Join(c.want, "\n") || rep.OK != (len(c.want) == 0) {
				t.Fatalf("found %v, want %v (%+v)", got, c.want, rep.Problems)
			}
			now := map[string]maint.ChainHead{}
			for _, h := range rep.Heads {
				now[h.Path] = h
			}
			for _, h := range clean.Heads {
				if changed := now[h.Path] != h; changed != (c.newHead && h.Path == orders) {
					t.Fatalf("chain head %+v, was %+v", now[h.Path], h)
				}
			}
		})
	}
}

// TestVerifyScopeAndSample: Keys, Prefix and Sample choose what is
// verified and how much is re-hashed, deterministically by seed.
func TestVerifyScopeAndSample(t *testing.T) {
	s, dir := newStore(t)
	auditFixture(t, s)
	k := []string{"other", "events"}
	put(t, s, store.ModeWrite, k, ids(0), store.PutOptions{})
	for i := int64(1); i < 40; i++ {
		put(t, s, store.ModeAppend, k, ids(i), store.PutOptions{})
	}
	if err := os.Remove(filepath.Join(dir, "sales", "orders", "v0", "0.parquet")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name     string
		o        maint.VerifyOptions
		problems int
		checked  int // -1: between 1 and 39
		heads    int
	}{
		{"all", maint.VerifyOptions{}, 1, 45, 3},
		{"prefix other", maint.VerifyOptions{Prefix: []string{"other"}}, 0, 40, 1},
		{"prefix sales", maint.VerifyOptions{Prefix: []string{"sales"}}, 1, 5, 2},
		{"prefix is matched by component", maint.VerifyOptions{Prefix: []string{"sal"}}, 0, 0, 0},
		{"profile", maint.VerifyOptions{Keys: []string{"sales/parts"}}, 0, 3, 1},
		{"sample", maint.VerifyOptions{Prefix: []string{"other"}, Sample: 0.5, Seed: 7}, 0, -1, 1},
		{"sample all", maint.VerifyOptions{Prefix: []string{"other"}, Sample: 1}, 0, 40, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := maint.Verify(ctx, s, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) != c.problems || rep.OK != (c.problems == 0) || len(rep.Heads) != c.heads {
				t.Fatalf("problems/heads: %+v", rep)
			}
			if c.checked >= 0 && rep.CheckedFiles != c.checked {
				t.Fatalf("checked %d, want %d", rep.CheckedFiles, c.checked)
			}
			if c.checked < 0 {
				if rep.CheckedFiles < 1 || rep.CheckedFiles > 39 {
					t.Fatalf("sample checked %d of 40", rep.CheckedFiles)
				}
				again, _ := maint.Verify(ctx, s, c.o)
				if again.CheckedFiles != rep.CheckedFiles {
					t.Fatalf("sampling is not deterministic: %d then %d", rep.CheckedFiles, again.CheckedFiles)
				}
			}
		})
	}
	// A sampled-out file is still checked for size: truncation is found
	// whatever the rate.
	p := filepath.Join(dir, "other", "events", "v0", "3.parquet")
	writeFile(t, p, string(readFile(t, p)[:20]), 0)
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{Prefix: []string{"other"}, Sample: 1e-9})
	if err != nil || len(rep.Problems) != 1 || rep.Problems[0].Kind != maint.ProblemMutated {
		t.Fatalf("truncated file at a tiny sample rate: %+v %v", rep, err)
	}
	if _, err := maint.Verify(ctx, s, maint.VerifyOptions{Keys: []string{"nope"}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("verify of a missing profile: %v", err)
	}
	if _, err := maint.Verify(ctx, s, maint.VerifyOptions{Sample: -1}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("negative sample: %v", err)
	}
	if _, err := maint.Verify(ctx, s, maint.VerifyOptions{Keys: []string{"v1"}}); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("reserved key: %v", err)
	}
}

// TestVerifyPyrosomeVersionIsUnrecorded: pyrosome's files are visible but
// unaudited: each is reported as unrecorded, nothing else.
func TestVerifyPyrosomeVersionIsUnrecorded(t *testing.T) {
	s, dir := newStore(t)
	copyTree(t, filepath.Join(pyrosomeFixture, "events"), filepath.Join(dir, "py"))
	rep, err := maint.Verify(context.Background(), s, maint.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(problems(rep.Problems), ","); got != "unrecorded py/v0/0.parquet,unrecorded py/v0/1.parquet,unrecorded py/v0/2.parquet" {
		t.Fatalf("got %v", got)
	}
	if rep.CheckedFiles != 0 || len(rep.Heads) != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// hookFS runs hook before the first ReadFile of a name ending in suffix.
type hookFS struct {
	fsys.FS
	suffix string
	hook   func()
}

func (h *hookFS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	if h.hook != nil && strings.HasSuffix(name, h.suffix) {
		fn := h.hook
		h.hook = nil
		fn()
	}
	return h.FS.ReadFile(ctx, name)
}

// TestVerifyDuringCommits: a commit by another server while Verify reads
// a profile's log is not a broken chain (found by the multi-process test:
// its concurrent sweeper refused the profile as "records were removed from
// its end").
func TestVerifyDuringCommits(t *testing.T) {
	dir := t.TempDir()
	l, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookFS{FS: l, suffix: "/.log/HEAD"}
	s, err := store.Open(dir, store.WithFS(h))
	if err != nil {
		t.Fatal(err)
	}
	other, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := []string{"busy"}
	put(t, other, store.ModeWrite, k, ids(1), store.PutOptions{})
	h.hook = func() { put(t, other, store.ModeAppend, k, ids(2), store.PutOptions{}) }
	rep, err := maint.Verify(context.Background(), s, maint.VerifyOptions{Keys: k})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if p.Kind == maint.ProblemChain {
			t.Fatalf("a commit during verify reads as a broken chain: %+v", rep.Problems)
		}
	}
}

// TestVerifySampleDrawsASeed (red team g10): a sampled verify without a
// seed draws one per run and reports it, so repeated audits reach every
// file; the reported seed repeats the sample.
func TestVerifySampleDrawsASeed(t *testing.T) {
	st, _ := newStore(t)
	for i := range 40 {
		put(t, st, store.ModeAppend, []string{"smp"}, ids(int64(i)), store.PutOptions{})
	}
	ctx := context.Background()
	seeds := map[int64]bool{}
	for range 3 {
		rep, err := maint.Verify(ctx, st, maint.VerifyOptions{Keys: []string{"smp"}, Sample: 0.2})
		if err != nil || !rep.OK {
			t.Fatalf("verify: %+v, %v", rep, err)
		}
		if rep.Seed == 0 {
			t.Fatal("a sampled verify without a seed reported none")
		}
		seeds[rep.Seed] = true
		again, err := maint.Verify(ctx, st, maint.VerifyOptions{Keys: []string{"smp"}, Sample: 0.2, Seed: rep.Seed})
		if err != nil || again.CheckedFiles != rep.CheckedFiles || again.Seed != rep.Seed {
			t.Fatalf("the reported seed did not repeat the sample: %d then %d files (%v)", rep.CheckedFiles, again.CheckedFiles, err)
		}
	}
	if len(seeds) < 2 {
		t.Fatal("three sampled verifies drew the same seed")
	}
}

// TestVerifySeesHiddenVersions (red team g03, g04): verify reports a
// .version.json its write record vouches for that was deleted or changed,
// and a manifest pointed at an empty directory, instead of "no problems".
func TestVerifySeesHiddenVersions(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   string
	}{
		{"version.json deleted", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "sales", "parts", "v0", ".version.json")); err != nil {
				t.Fatal(err)
			}
		}, "missing sales/parts/v0/.version.json"},
		{"version.json changed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "sales", "parts", "v0", ".version.json")
			b := readFile(t, p)
			b = append(b[:len(b)-1], ' ', b[len(b)-1])
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "mutated sales/parts/v0/.version.json"}, // named, and the rest still checked (red team round 19, t03)
		{"manifest at an empty directory", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "sales", "orders", "v9"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sales", "orders", "manifest.json"), []byte(`{"latest_data_dir": "v9"}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "mutated sales/orders/manifest.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, dir := newStore(t)
			auditFixture(t, st)
			c.tamper(t, dir)
			st2, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := maint.Verify(context.Background(), st2, maint.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := problems(rep.Problems)
			if rep.OK || !slices.Contains(got, c.want) {
				t.Fatalf("problems %v, want %q among them", got, c.want)
			}
		})
	}
}

// flip flips one byte in the middle of a file.
func flip(t *testing.T, p string) {
	t.Helper()
	b := readFile(t, p)
	b[len(b)/2] ^= 0x01
	writeFile(t, p, string(b), 0)
}

// remove deletes a file.
func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// editJSON sets one field of a JSON object file (a tamperer's edit that
// keeps it valid).
func editJSON(t *testing.T, p, field string, value any) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFile(t, p), &m); err != nil {
		t.Fatal(err)
	}
	m[field] = value
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, string(b), 0)
}
