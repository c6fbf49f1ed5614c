package integration

import (
	"slices"
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
