package store

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestNotRegularManifestOrLock: a manifest or a manifest lock replaced by
// a directory is corruption (CorruptionError: DataLoss on the wire), not an internal error (red team
// round 15's h02, h03).
func TestNotRegularManifestOrLock(t *testing.T) {
	for _, name := range []string{manifestName, lockName} {
		t.Run(name, func(t *testing.T) {
			s, dir := newTestStore(t)
			k := []string{"p"}
			put(t, s, ModeWrite, k, ids(1), PutOptions{})
			target := filepath.Join(dir, "p", name)
			_ = os.Remove(target)
			if err := os.Mkdir(target, 0o755); err != nil {
				t.Fatal(err)
			}
			rdr := ids(2)
			_, err := s.Append(context.Background(), k, rdr, PutOptions{})
			rdr.Release()
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("append with %s a directory: %v, want a CorruptionError", name, err)
			}
			if _, err := s.BreakLock(context.Background(), k); name == lockName && !errors.As(err, &ce) {
				t.Fatalf("break-lock with the lock a directory: %v, want a CorruptionError", err)
			}
			if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
				t.Fatalf("the directory was changed: %v", err)
			}
		})
	}
}

// TestImpossiblePIDIsGone: a pid no process can have (above 2^31-1) is
// not alive; kill(2) would have seen it cut to 32 bits (red team round
// 15's h04: 2^32 became 0, this process's group).
func TestImpossiblePIDIsGone(t *testing.T) {
	for _, pid := range []int{1 << 32, 1<<32 + 1, math.MaxInt64, math.MaxInt32 + 1} {
		if _, alive := (linuxProcs{}).startTime(pid); alive {
			t.Errorf("pid %d judged alive", pid)
		}
	}
	if _, alive := (linuxProcs{}).startTime(os.Getpid()); !alive {
		t.Error("this process judged gone")
	}
}

// TestLogDeletedUnderServer: a profile's commit log deleted under a
// running store: the next put is refused (DataLoss), not acknowledged on
// top of a log every fresh reader refuses (red team round 15's h01).
func TestLogDeletedUnderServer(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"p"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	put(t, s, ModeAppend, k, ids(2), PutOptions{})
	if err := os.RemoveAll(filepath.Join(dir, "p", logDir)); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{ModeAppend, ModeWrite} {
		rdr := ids(3)
		_, err := s.Put(context.Background(), k, rdr, PutOptions{Mode: mode})
		rdr.Release()
		if !errors.Is(err, ErrDataLoss) {
			t.Fatalf("%s after the log was deleted: %v, want ErrDataLoss", mode, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "p", logDir, segmentName(3))); !os.IsNotExist(err) {
		t.Fatalf("a segment was committed on the deleted log: %v", err)
	}
}
