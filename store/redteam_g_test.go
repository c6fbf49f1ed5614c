package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestMissingVersionInfoIsDataLoss (red team g04): a .version.json that its
// write record vouches for and that was deleted fails reads with DataLoss
// (the version would otherwise read as pyrosome's, its partition column
// gone) instead of being read silently as another version.
func TestMissingVersionInfoIsDataLoss(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"g04"}
	put(t, s, ModeWrite, k, ids(1, 2), PutOptions{})
	if err := os.Remove(filepath.Join(dir, "g04", "v0", versionInfoName)); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir) // a fresh process: nothing cached
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.Snapshot(context.Background(), k, SnapshotOptions{Version: Latest})
	if !errors.Is(err, ErrDataLoss) {
		t.Fatalf("snapshot with .version.json deleted: %v, want ErrDataLoss", err)
	}
}

// TestCompactionIgnoresThePutLimit (red team g12): --max-put-bytes bounds
// what a client sends in one put; a compaction of a larger profile is no
// client's put and is not refused by it.
func TestCompactionIgnoresThePutLimit(t *testing.T) {
	s, _ := newTestStore(t, WithMaxPutBytes(4<<10))
	k := []string{"g12"}
	big := make([]int64, 300) // about 2.4 KiB of Arrow each
	for i := range 4 {
		for j := range big {
			big[j] = int64(i*1000 + j)
		}
		put(t, s, ModeAppend, k, ids(big...), PutOptions{})
	}
	if _, err := s.Compact(context.Background(), k, CompactOptions{}); err != nil {
		t.Fatalf("compaction under a small put limit: %v", err)
	}
}
