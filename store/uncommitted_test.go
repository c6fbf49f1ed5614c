package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNeverCommittedDirectories (red team round 25's z01): which
// directories without a manifest the maintenance walk passes as left by a
// first write that never committed (ListProfilesAndUncommitted), which
// InspectUncommitted inspects and WithLock locks; listings (ListProfiles)
// and Inspect show none of them, and nothing else is one.
func TestNeverCommittedDirectories(t *testing.T) {
	// The lock of a killed writer: its process is gone.
	host, _ := os.Hostname()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadLock, _ := json.Marshal(Owner{Host: host, PID: gone.Process.Pid, Time: time.Now()})
	cases := []struct {
		name  string
		files map[string]string // relative to the directory x/y; "" makes a directory
		// uncommitted: x/y is left by a first write that never committed
		uncommitted bool
	}{
		{"a reserved version with its .version.json", map[string]string{"v0/.version.json": "{}", "v0/region=eu/.a.0.parquet.tmp": "x"}, true},
		{"a reserved version, empty", map[string]string{"v3/": ""}, true},
		{"a killed commit's lock and log temp", map[string]string{"manifest.json.write_lock": string(deadLock), ".log/.s.ndjson.tmp": "x"}, true},
		{"a profile marker alone", map[string]string{".quiver.kind": "profile\n"}, true},
		// Red team round 26's a03: killed while it wrote its .version.json.
		{"a reserved version holding only its .version.json temp", map[string]string{"v0/.0123..version.json.tmp": `{"form`}, true},
		{"a version holding a temp and a data file (pyrosome's)", map[string]string{"v0/.a.0.parquet.tmp": "x", "v0/0.parquet": "x"}, false},
		// Red team round 26's a01: a first put of x/y killed after x/y/z
		// was created.
		{"a parent holding a version of its own", map[string]string{".quiver.kind": "parent\n", "z/manifest.json": `{"latest_data_dir": "v0"}`, "v0/.version.json": "{}"}, true},
		{"a parent holding a version with only its .version.json temp", map[string]string{".quiver.kind": "parent\n", "z/manifest.json": `{"latest_data_dir": "v0"}`, "v0/.0123..version.json.tmp": "{"}, true},
		{"a parent of profiles", map[string]string{".quiver.kind": "parent\n", "z/manifest.json": `{"latest_data_dir": "v0"}`}, false},
		{"a parent with a lock in it", map[string]string{".quiver.kind": "parent\n", "manifest.json.write_lock": "{}"}, false},
		{"an empty directory", map[string]string{}, false},
		{"a version without .version.json (pyrosome's)", map[string]string{"v0/0.parquet": "x"}, false},
		{"files the layout does not define", map[string]string{"notes.txt": "x", "data/": ""}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newTestStore(t)
			ctx := context.Background()
			keys := []string{"x", "y"}
			if err := os.MkdirAll(filepath.Join(dir, "x", "y"), 0o755); err != nil {
				t.Fatal(err)
			}
			for rel, data := range c.files {
				p := filepath.Join(dir, "x", "y", filepath.FromSlash(rel))
				if strings.HasSuffix(rel, "/") {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var listed, walked []string
			err := s.ListProfiles(ctx, nil, func(ps ProfileSummary) error {
				listed = append(listed, ps.Path())
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.ListProfilesAndUncommitted(ctx, nil, func(ps ProfileSummary) error {
				if ps.Uncommitted {
					walked = append(walked, ps.Path())
					if ps.Err != nil || ps.Latest != -1 {
						t.Errorf("%+v", ps)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range listed {
				if strings.HasPrefix(p, "x/y") && p != "x/y/z" {
					t.Errorf("ListProfiles lists %s", p)
				}
			}
			want := ""
			if c.uncommitted {
				want = "x/y"
			}
			if got := strings.Join(walked, ","); got != want {
				t.Errorf("walked as uncommitted: %q, want %q", got, want)
			}
			if _, err := s.Inspect(ctx, keys); !errors.Is(err, ErrNotFound) {
				t.Errorf("Inspect: %v", err)
			}
			in, err := s.InspectUncommitted(ctx, keys)
			switch {
			case c.uncommitted && (err != nil || !in.Uncommitted || in.Latest != -1 || in.ManifestErr != nil || len(in.LogProblems) > 0):
				t.Errorf("InspectUncommitted: %+v %v", in, err)
			case !c.uncommitted && !errors.Is(err, ErrNotFound):
				t.Errorf("InspectUncommitted of no leftover: %+v %v", in, err)
			}
			ran := false
			err = s.WithLock(ctx, keys, func() error { ran = true; return nil })
			switch {
			case c.uncommitted && (err != nil || !ran):
				t.Errorf("WithLock: %v", err)
			case !c.uncommitted && !errors.Is(err, ErrNotFound):
				t.Errorf("WithLock of no leftover: %v (ran %v)", err, ran)
			}
			if _, _, err := s.Versions(ctx, keys); !errors.Is(err, ErrNotFound) {
				t.Errorf("Versions: %v", err)
			}
		})
	}
}
