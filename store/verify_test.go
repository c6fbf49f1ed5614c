package store

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

var regionSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// auditFixture fills a store with an unpartitioned profile sales/orders
// (v0: write + 2 appends) and a partitioned one sales/parts (v0: write +
// append, partitioned by region).
func auditFixture(t *testing.T, s *Store) {
	t.Helper()
	orders := []string{"sales", "orders"}
	put(t, s, ModeWrite, orders, ids(1, 2, 3), PutOptions{SchemaVersion: "1.0.0"})
	put(t, s, ModeAppend, orders, ids(4), PutOptions{})
	put(t, s, ModeAppend, orders, ids(5), PutOptions{})
	parts := []string{"sales", "parts"}
	put(t, s, ModeWrite, parts, fromJSON(t, regionSchema, `[{"id":1,"region":"eu"},{"id":2,"region":"us"}]`), PutOptions{PartitionBy: []string{"region"}})
	put(t, s, ModeAppend, parts, fromJSON(t, regionSchema, `[{"id":3,"region":"eu"}]`), PutOptions{})
}

// writable makes a read-only data file writable, as a tamperer would.
func writable(t *testing.T, p string) {
	t.Helper()
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dst); err == nil {
		writable(t, dst)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// sameSizeParquet writes scratch profiles until one's only file is a valid
// Parquet file of exactly size bytes that differs from the content of want.
func sameSizeParquet(t *testing.T, s *Store, dir string, size int64, want []byte) string {
	t.Helper()
	for v := int64(100); v < 200; v++ {
		keys := []string{"scratch", "p" + time.Duration(v).String()}
		put(t, s, ModeWrite, keys, ids(v), PutOptions{SchemaVersion: "1.0.0"})
		p := filepath.Join(dir, "scratch", keys[1], "v0", "0.parquet")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) == size && string(b) != string(want) {
			return p
		}
	}
	t.Fatal("no same-size Parquet file found")
	return ""
}

func TestVerifyTamper(t *testing.T) {
	const (
		orders = "sales/orders"
		parts  = "sales/parts"
	)
	cases := []struct {
		name   string
		tamper func(t *testing.T, s *Store, dir string)
		kind   string // "" for a clean store
		path   string
	}{
		{"clean", func(*testing.T, *Store, string) {}, "", ""},
		{"flip one byte", func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, orders, "v0", "1.parquet")
			writable(t, p)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x01
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ProblemMutated, orders + "/v0/1.parquet"},
		{"truncate", func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, orders, "v0", "0.parquet")
			writable(t, p)
			if err := os.Truncate(p, 10); err != nil {
				t.Fatal(err)
			}
		}, ProblemMutated, orders + "/v0/0.parquet"},
		{"delete", func(t *testing.T, _ *Store, dir string) {
			if err := os.Remove(filepath.Join(dir, orders, "v0", "2.parquet")); err != nil {
				t.Fatal(err)
			}
		}, ProblemMissing, orders + "/v0/2.parquet"},
		{"delete partition file", func(t *testing.T, _ *Store, dir string) {
			if err := os.Remove(filepath.Join(dir, parts, "v0", "region=us", "0.parquet")); err != nil {
				t.Fatal(err)
			}
		}, ProblemMissing, parts + "/v0/region=us/0.parquet"},
		{"replace with valid parquet of same size", func(t *testing.T, s *Store, dir string) {
			p := filepath.Join(dir, orders, "v0", "1.parquet")
			old, _ := os.ReadFile(p)
			copyFile(t, sameSizeParquet(t, s, dir, int64(len(old)), old), p)
			if err := os.RemoveAll(filepath.Join(dir, "scratch")); err != nil {
				t.Fatal(err)
			}
		}, ProblemMutated, orders + "/v0/1.parquet"},
		{"unlisted file under a partition", func(t *testing.T, _ *Store, dir string) {
			copyFile(t, filepath.Join(dir, parts, "v0", "region=eu", "0.parquet"), filepath.Join(dir, parts, "v0", "region=eu", "7.parquet"))
		}, ProblemOrphan, parts + "/v0/region=eu/7.parquet"},
		{"numbered file at a version root (pyrosome's)", func(t *testing.T, _ *Store, dir string) {
			copyFile(t, filepath.Join(pyrosomeFixture, "events", "v0", "1.parquet"), filepath.Join(dir, orders, "v0", "9.parquet"))
		}, ProblemUnrecorded, orders + "/v0/9.parquet"},
		{"Quiver file at a version root without its record", func(t *testing.T, _ *Store, dir string) {
			copyFile(t, filepath.Join(dir, orders, "v0", "1.parquet"), filepath.Join(dir, orders, "v0", "9.parquet"))
		}, ProblemOrphan, orders + "/v0/9.parquet"},
		{"rewritten commit record", func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, orders, "v0", ".1.commit.json")
			writable(t, p)
			if err := os.WriteFile(p, []byte(`{"version":"v0","index":1,`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, ProblemMutated, orders + "/v0/.1.commit.json"},
		{"stale temp", func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, parts, "v0", "region=eu", ".0123.parquet.tmp")
			if err := os.WriteFile(p, []byte("half"), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-2 * time.Hour)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
			// A fresh temp is a writer at work, not a problem.
			if err := os.WriteFile(filepath.Join(dir, orders, "v0", ".fresh.parquet.tmp"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ProblemStaleTemp, parts + "/v0/region=eu/.0123.parquet.tmp"},
		{"stale lock of a dead owner", func(t *testing.T, s *Store, dir string) {
			b, _ := json.Marshal(LockInfo{Host: s.opts.host, PID: deadPID(t), Time: time.Now()})
			if err := os.WriteFile(filepath.Join(dir, orders, lockName), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ProblemStaleLock, orders + "/" + lockName},
		{"abandoned version", func(t *testing.T, _ *Store, dir string) {
			p := filepath.Join(dir, orders, "v5")
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-2 * time.Hour)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}, ProblemOrphan, orders + "/v5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newTestStore(t)
			auditFixture(t, s)
			c.tamper(t, s, dir)
			rep, err := s.Verify(context.Background(), VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.kind == "" {
				if !rep.OK || len(rep.Problems) != 0 || rep.CheckedFiles != 6 {
					t.Fatalf("clean store: %+v", rep)
				}
				return
			}
			if rep.OK || len(rep.Problems) != 1 {
				t.Fatalf("want one %s problem, got %+v", c.kind, rep)
			}
			got := rep.Problems[0]
			if got.Kind != c.kind || got.Path != c.path || got.Detail == "" {
				t.Fatalf("got %+v, want kind %s path %s", got, c.kind, c.path)
			}
			b, _ := json.Marshal(rep)
			if strings.Contains(string(b), dir) {
				t.Fatalf("report shows the server path: %s", b)
			}
			// The same problem is found when verifying just that profile.
			keys := strings.Split(c.path, "/")[:2]
			one, err := s.Verify(context.Background(), VerifyOptions{Keys: keys})
			if err != nil {
				t.Fatal(err)
			}
			if len(one.Problems) != 1 || one.Problems[0].Kind != got.Kind || one.Problems[0].Path != got.Path {
				t.Fatalf("verify %v: %+v", keys, one)
			}
		})
	}
}

func TestVerifyScopeAndSample(t *testing.T) {
	s, dir := newTestStore(t)
	auditFixture(t, s)
	k := []string{"other", "events"}
	put(t, s, ModeWrite, k, ids(0), PutOptions{})
	for i := int64(1); i < 40; i++ {
		put(t, s, ModeAppend, k, ids(i), PutOptions{})
	}
	p := filepath.Join(dir, "sales", "orders", "v0", "0.parquet")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cases := []struct {
		name     string
		o        VerifyOptions
		problems int
		checked  int // -1: between 1 and 39
	}{
		{"all", VerifyOptions{}, 1, 45},
		{"prefix other", VerifyOptions{Prefix: []string{"other"}}, 0, 40},
		{"prefix sales", VerifyOptions{Prefix: []string{"sales"}}, 1, 5},
		{"profile", VerifyOptions{Keys: []string{"sales/parts"}}, 0, 3},
		{"sample", VerifyOptions{Prefix: []string{"other"}, Sample: 0.5, Seed: 7}, 0, -1},
		{"sample all", VerifyOptions{Prefix: []string{"other"}, Sample: 1}, 0, 40},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := s.Verify(ctx, c.o)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) != c.problems || rep.OK != (c.problems == 0) {
				t.Fatalf("problems: %+v", rep)
			}
			if c.checked >= 0 && rep.CheckedFiles != c.checked {
				t.Fatalf("checked %d, want %d", rep.CheckedFiles, c.checked)
			}
			if c.checked < 0 {
				if rep.CheckedFiles < 1 || rep.CheckedFiles > 39 {
					t.Fatalf("sample checked %d of 40", rep.CheckedFiles)
				}
				again, _ := s.Verify(ctx, c.o)
				if again.CheckedFiles != rep.CheckedFiles {
					t.Fatalf("sampling is not deterministic: %d then %d", rep.CheckedFiles, again.CheckedFiles)
				}
			}
		})
	}
	if _, err := s.Verify(ctx, VerifyOptions{Keys: []string{"nope"}}); err == nil {
		t.Fatal("verify of a missing profile succeeded")
	}
}

func TestVerifyPyrosomeVersionIsUnrecorded(t *testing.T) {
	s, dir := newTestStore(t)
	copyTree(t, filepath.Join(pyrosomeFixture, "events"), filepath.Join(dir, "py"))
	rep, err := s.Verify(context.Background(), VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range rep.Problems {
		kinds = append(kinds, p.Kind+" "+p.Path)
	}
	sort.Strings(kinds)
	if strings.Join(kinds, ",") != "unrecorded py/v0/0.parquet,unrecorded py/v0/1.parquet,unrecorded py/v0/2.parquet" {
		t.Fatalf("got %v", kinds)
	}
}
