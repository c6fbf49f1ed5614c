package store_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/crashfs"
)

// holdSyncFS is crashfs whose every SyncDir of one directory waits until
// released, telling when it started; the syncs of other directories
// report when they are done.
type holdSyncFS struct {
	*crashfs.FS
	hold    string
	mu      sync.Mutex
	armed   bool
	started chan struct{} // one per held sync
	release chan struct{} // one per held sync
	synced  chan string
}

func (h *holdSyncFS) SyncDir(ctx context.Context, dir string) error {
	h.mu.Lock()
	armed := h.armed
	h.mu.Unlock()
	if armed && dir == h.hold {
		h.started <- struct{}{}
		<-h.release
	}
	err := h.FS.SyncDir(ctx, dir)
	if armed && dir != h.hold {
		select {
		case h.synced <- dir:
		default:
		}
	}
	return err
}

// TestPowerLossPartitionFileWithoutClaim: a power loss during the commit
// cycle of an append to a partitioned version can leave a data file of
// index i under a partition directory durable while the claim of index i
// (.i.parquet.claim, in the version directory) is not: the cycle syncs the
// version directory and the partition directories in parallel
// (commitSegment), and any cycle that syncs a partition directory makes
// every file linked in it durable, claimed durably or not. The format's
// rule "a claim is never absent while a file of its index may exist" then
// holds in the page cache but not on disk.
//
// After the reboot a fresh server scans the version root, finds index i
// free, claims it, and its append fails with "file exists" when it links
// its file in that partition (put.go, openFile: a data file's Commit
// never replaces); the refused put removes its claim, so the first such
// put of every fresh process fails, until sweep removes the orphan (an
// hour after it was written, by default). No acknowledged data is lost.
//
// Found by TestPowerLoss. Fixed: a partitioned append makes its claim
// durable (a sync of the version directory) before it creates a file in a
// partition directory. The test crashes at every sync of the version
// directory the append makes, once the syncs beside it are done, and
// appends to that partition after each reboot.
func TestPowerLossPartitionFileWithoutClaim(t *testing.T) {
	ctx := context.Background()
	l, err := fsys.NewLocal(filepath.Join(t.TempDir(), "live"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := crashfs.New(ctx, l, crashfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"pl", "parts"}
	h := &holdSyncFS{FS: cf, hold: "pl/parts/v0", started: make(chan struct{}), release: make(chan struct{}), synced: make(chan string, 16)}
	s, err := store.Open("live", store.WithFS(h))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// crashBatches(0, 0, 3): rows in partitions b, c, a.
	rdr := crashBatches(0, 0, 3)
	_, err = s.Put(ctx, keys, rdr, store.PutOptions{Mode: store.ModeWrite, PartitionBy: []string{"part"}})
	rdr.Release()
	if err != nil {
		t.Fatal(err)
	}
	// An append of one row (partition c, seq 2 j 0). Each sync of the
	// version directory it makes is held: the crash comes once the
	// syncs running beside it (the partition directory's, in the commit
	// cycle) are done.
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		rdr := crashBatches(0, 2, 1)
		defer rdr.Release()
		_, err := s.Put(ctx, keys, rdr, store.PutOptions{})
		done <- err
	}()
	var imgs []string
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
			continue
		case <-h.started:
		case <-time.After(30 * time.Second):
			t.Fatal("the append neither finished nor synced the version directory")
		}
		select {
		case <-h.synced:
		case <-time.After(time.Second):
		}
		img := filepath.Join(t.TempDir(), "crash")
		if _, err := cf.Crash(img); err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
		h.release <- struct{}{}
	}
	if len(imgs) == 0 {
		t.Fatal("the append never synced the version directory")
	}

	// The server after each reboot.
	for k, img := range imgs {
		s2, err := store.Open(img, store.WithHost("rebooted"), store.WithLockStaleAfter(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			rdr := crashBatches(1, 2, 1) // partition c again
			_, err := s2.Put(ctx, keys, rdr, store.PutOptions{})
			rdr.Release()
			if err != nil {
				t.Errorf("crash %d: append %d after the power loss: %v", k, i, err)
			}
		}
		s2.Close()
	}
}
