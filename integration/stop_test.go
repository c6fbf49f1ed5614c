package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/quiverdb/quiver/client"
)

// TestStopInterruptsPut: SIGTERM while a put is streaming; after
// --stop-timeout the put is cancelled, the server exits 0 (checked at
// cleanup) and the put committed nothing.
func TestStopInterruptsPut(t *testing.T) {
	s := startServer(t, "--stop-timeout", "500ms")
	b := batch(0, 10_000)
	defer b.Release()
	mustPut(t, s.client, "s", client.PutOptions{}, b)
	before := dataFiles(t, s.dataDir)

	// Raw: a put stream that is never ended.
	stream, err := s.flight.DoPut(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(b.Schema()))
	w.SetFlightDescriptor(pathDesc("s"))
	for i := 0; i < 5; i++ {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The stream is left open: the server must cancel it itself.
	if _, err := stream.Recv(); err == nil {
		t.Fatal("an unfinished put got a result")
	}
	select {
	case <-s.Done():
		if err := s.Err(); err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10 s of SIGTERM")
	}
	if after := dataFiles(t, s.dataDir); !slices.Equal(after, before) {
		t.Fatalf("an interrupted put left a trace:\nbefore %v\nafter  %v", before, after)
	}
}

// TestStopReleasesLingeringLock: SIGTERM right after a put, while the
// commit keeps the profile's lock for a next put (--commit-linger): the
// server releases it before it exits, and .log/HEAD names the last
// record.
func TestStopReleasesLingeringLock(t *testing.T) {
	s := startServer(t, "--commit-linger", "100ms")
	if s.dataDir == "" {
		t.Skip("the storage is not a local directory")
	}
	b := batch(0, 10)
	defer b.Release()
	mustPut(t, s.client, "s", client.PutOptions{}, b)
	mustPut(t, s.client, "s", client.PutOptions{}, b)
	lock := filepath.Join(s.dataDir, "s", "manifest.json.write_lock")
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the lock is not kept after the put: %v", err)
	}
	if err := s.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
		if err := s.Err(); err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop within 10 s of SIGTERM")
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Fatalf("the lock is still there after the server stopped: %v", err)
	}
	head, err := os.ReadFile(filepath.Join(s.dataDir, "s", ".log", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(head), `"seq":2,`) {
		t.Fatalf("HEAD after the stop is %s, want record 2", head)
	}
}
