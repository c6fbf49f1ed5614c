package maint_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// TestOneBadEntryDoesNotBlindTheAudit: whatever one profile's directory
// holds (a committed version gone, a FIFO or a link where the lock, a
// segment, .version.json, the log or its head should be, a head that does
// not parse), verify and sweep of the whole data directory go on: the
// profile is reported, the others are verified (red team F16, F18).
func TestOneBadEntryDoesNotBlindTheAudit(t *testing.T) {
	plant := map[string]func(t *testing.T, pdir string){
		"committed version gone": func(t *testing.T, pdir string) { os.RemoveAll(filepath.Join(pdir, "v0")) },
		"fifo lock":              func(t *testing.T, pdir string) { mkfifo(t, filepath.Join(pdir, "manifest.json.write_lock")) },
		"fifo segment": func(t *testing.T, pdir string) {
			seg := filepath.Join(pdir, ".log", "00000000000000000001.ndjson")
			os.Remove(seg)
			mkfifo(t, seg)
		},
		"fifo version info": func(t *testing.T, pdir string) {
			f := filepath.Join(pdir, "v1", ".version.json")
			os.Remove(f)
			mkfifo(t, f)
		},
		"link log": func(t *testing.T, pdir string) {
			os.RemoveAll(filepath.Join(pdir, ".log"))
			os.Symlink(t.TempDir(), filepath.Join(pdir, ".log"))
		},
		"garbled head": func(t *testing.T, pdir string) {
			os.WriteFile(filepath.Join(pdir, ".log", "HEAD"), []byte("\x00garbage"), 0o644)
		},
		"directory head": func(t *testing.T, pdir string) {
			os.Remove(filepath.Join(pdir, ".log", "HEAD"))
			os.Mkdir(filepath.Join(pdir, ".log", "HEAD"), 0o755)
		},
		"link head": func(t *testing.T, pdir string) {
			h := filepath.Join(pdir, ".log", "HEAD")
			b, _ := os.ReadFile(h)
			target := filepath.Join(t.TempDir(), "HEAD")
			os.WriteFile(target, b, 0o644)
			os.Remove(h)
			os.Symlink(target, h)
		},
		"link version info": func(t *testing.T, pdir string) {
			f := filepath.Join(pdir, "v1", ".version.json")
			os.Remove(f)
			os.Symlink("/etc/hostname", f)
		},
	}
	for name, fn := range plant {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for _, k := range []string{"a/bad", "b/good"} {
				put(t, s, store.ModeWrite, []string{k}, ids(1), store.PutOptions{})
				put(t, s, store.ModeWrite, []string{k}, ids(2), store.PutOptions{})
			}
			fn(t, filepath.Join(dir, "a", "bad"))
			s2, _ := store.Open(dir) // no cache
			rep, err := maint.Verify(ctx, s2, maint.VerifyOptions{})
			if err != nil {
				t.Fatalf("verify of the data dir failed: %v", err)
			}
			if rep.OK {
				t.Fatalf("verify found nothing: %+v", rep)
			}
			for _, p := range rep.Problems {
				if filepath.Dir(filepath.Dir(p.Path)) == "b" || p.Path[:1] == "b" {
					t.Errorf("the good profile got a problem: %+v", p)
				}
			}
			if rep.CheckedFiles < 2 {
				t.Errorf("the good profile was not verified: %+v", rep)
			}
			if _, err := maint.Sweep(ctx, s2, 0); err != nil {
				t.Fatalf("sweep of the data dir failed: %v", err)
			}
		})
	}
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAbandonedCreationBelowAProfileIsSwept: a put killed while creating
// a/b leaves a/b/v0 behind; once a is a profile, that directory is reported
// as an orphan and swept when old, not an unknown entry forever (red team
// F21).
func TestAbandonedCreationBelowAProfileIsSwept(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	vdir := filepath.Join(dir, "a", "b", "v0")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".version.json", "0.parquet"} {
		if err := os.WriteFile(filepath.Join(vdir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(t, s, store.ModeWrite, []string{"a"}, ids(1), store.PutOptions{})
	rep, err := maint.Verify(ctx, s, maint.VerifyOptions{})
	if err != nil || len(rep.Problems) != 1 || rep.Problems[0].Kind != maint.ProblemOrphan || rep.Problems[0].Path != "a/b" {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if sw, err := maint.Sweep(ctx, s, 0); err != nil || len(sw.Removed) == 0 {
		t.Fatalf("sweep: %+v %v", sw, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b")); !os.IsNotExist(err) {
		t.Fatalf("a/b is still there: %v", err)
	}
	if rep, err := maint.Verify(ctx, s, maint.VerifyOptions{}); err != nil || !rep.OK {
		t.Fatalf("verify after sweep: %+v %v", rep, err)
	}
}
