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

// TestDeletedManifestDoesNotHideTheProfile (red team g05): a profile whose
// manifest.json was deleted is still read from its commit log, and listing
// (so verify) reports the missing manifest instead of skipping the profile.
func TestDeletedManifestDoesNotHideTheProfile(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"g05", "p"}
	put(t, s, ModeWrite, k, ids(1, 2), PutOptions{})
	put(t, s, ModeAppend, k, ids(3), PutOptions{})
	if err := os.Remove(filepath.Join(dir, "g05", "p", manifestName)); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := readIDs(t, s2, k, Latest); len(got) != 3 {
		t.Fatalf("rows after the manifest was deleted: %v", got)
	}
	var found error
	err = s2.ListProfiles(context.Background(), nil, func(ps ProfileSummary) error {
		if ps.Path() == "g05/p" {
			found = ps.Err
			if found == nil {
				found = errors.New("listed without an error")
			}
		}
		return nil
	})
	if err != nil || !errors.Is(found, ErrDataLoss) {
		t.Fatalf("listing: %v, profile: %v; want it listed with ErrDataLoss", err, found)
	}
	// The next commit writes the manifest again.
	put(t, s2, ModeAppend, k, ids(4), PutOptions{})
	if _, err := os.Stat(filepath.Join(dir, "g05", "p", manifestName)); err != nil {
		t.Fatalf("manifest after the next commit: %v", err)
	}
}

// TestManifestAtAnEmptyDirectoryIsDataLoss (red team g03): a manifest
// pointed at an empty version directory in a profile with committed writes
// fails reads with DataLoss instead of serving no rows.
func TestManifestAtAnEmptyDirectoryIsDataLoss(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"g03"}
	put(t, s, ModeWrite, k, ids(1, 2), PutOptions{})
	if err := os.Mkdir(filepath.Join(dir, "g03", "v7"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "g03", manifestName), []byte(`{"latest_data_dir": "v7"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Snapshot(context.Background(), k, SnapshotOptions{Version: Latest}); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("snapshot: %v, want ErrDataLoss", err)
	}
}

// TestAppendToTamperedEmptyVersionRefused (red team g03): an append to a
// profile whose manifest was pointed at an empty directory fails with
// DataLoss instead of becoming a write that hides the committed rows.
func TestAppendToTamperedEmptyVersionRefused(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"g03a"}
	put(t, s, ModeWrite, k, ids(1, 2), PutOptions{})
	if err := os.Mkdir(filepath.Join(dir, "g03a", "v5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "g03a", manifestName), []byte(`{"latest_data_dir": "v5"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Put(context.Background(), k, ids(3), PutOptions{Mode: ModeAppend}); !errors.Is(err, ErrDataLoss) {
		t.Fatalf("append: %v, want ErrDataLoss", err)
	}
}

// TestPolicyFileReplacedByDirectory (red team h04): a directory where the
// schema policy file belongs is corruption (DataLoss at the server), for
// reads of the policy and for setting it, never an internal error.
func TestPolicyFileReplacedByDirectory(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"h04"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	if err := os.Mkdir(filepath.Join(dir, "h04", policyName), 0o755); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptionError
	if _, err := s.Policy(context.Background(), k); !errors.As(err, &ce) {
		t.Fatalf("Policy: %v, want a CorruptionError", err)
	}
	if _, err := s.SetPolicy(context.Background(), k, PolicyAdditive, ""); !errors.As(err, &ce) {
		t.Fatalf("SetPolicy: %v, want a CorruptionError", err)
	}
}
