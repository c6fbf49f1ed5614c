package flightserver

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
)

type testServer struct {
	c    flight.Client
	srv  *Server
	st   *store.Store
	addr string
}

// startSrv runs a Server over a temp store on a loopback port. With
// checked, its allocator must be back to zero when the test ends.
func startSrv(t *testing.T, checked bool, opts ...Option) *testServer {
	t.Helper()
	var mem memory.Allocator = memory.NewGoAllocator()
	var cmem *memory.CheckedAllocator
	if checked {
		cmem = memory.NewCheckedAllocator(mem)
		mem = cmem
	}
	st, err := store.Open(t.TempDir(), store.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the stop below
		if cmem != nil {
			assertFreed(t, cmem)
		}
	})
	srv := New(st, append([]Option{WithAllocator(mem)}, opts...)...)
	addr := quivertest.ServeInProcess(t, srv)
	c := quivertest.MustDial(t, addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(4<<20)))
	return &testServer{c: c, srv: srv, st: st, addr: addr}
}

// TestPanicRecovered injects a panic into DoPut (after its first batch),
// DoGet (after its first batch message), a unary RPC (GetFlightInfo) and
// the goroutine a guarded send runs in: each answers Internal "internal
// error" without the panic's text, the panic is logged with its stack and
// counted, and the server answers the next RPCs.
func TestPanicRecovered(t *testing.T) {
	for _, point := range []string{"DoPut", "DoGet", "GetFlightInfo", "send"} {
		t.Run(point, func(t *testing.T) {
			var armed atomic.Bool
			var logs syncBuffer
			ts := startSrv(t, false, WithLogger(zerolog.New(&logs)), withTestHook(func(p string) {
				if p == point && armed.CompareAndSwap(true, false) {
					panic("boom in /srv/secret/data")
				}
			}))
			rec := strBatch(100, 10)
			defer rec.Release()
			ctx := context.Background()
			if point != "DoPut" {
				if err := putErr(ctx, ts.c, []string{"p"}, rec); err != nil {
					t.Fatal(err)
				}
			}
			armed.Store(true)
			var err error
			switch point {
			case "DoPut":
				err = putErr(ctx, ts.c, []string{"p"}, rec)
			case "DoGet", "send":
				err = getErr(ctx, ts.c, "p")
			case "GetFlightInfo":
				_, err = ts.c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"p"}})
			}
			if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "boom") {
				t.Fatalf("%s with a panic: %v", point, err)
			}
			if armed.Load() {
				t.Fatal("the hook never ran")
			}
			// The server keeps serving: a put and a read work.
			if err := putErr(ctx, ts.c, []string{"q"}, rec); err != nil {
				t.Fatalf("put after the panic: %v", err)
			}
			if err := getErr(ctx, ts.c, "q"); err != nil {
				t.Fatalf("get after the panic: %v", err)
			}
			if _, err := ts.c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"q"}}); err != nil {
				t.Fatalf("GetFlightInfo after the panic: %v", err)
			}
			if point == "DoPut" {
				// The panicking put committed nothing.
				if err := getErr(ctx, ts.c, "p"); status.Code(err) != codes.NotFound {
					t.Fatalf("profile of the panicked put: %v", err)
				}
			}
			out := logs.String()
			if !strings.Contains(out, "panic recovered") || !strings.Contains(out, "boom in /srv/secret/data") || !strings.Contains(out, "goroutine") {
				t.Fatalf("log lacks the panic and its stack:\n%s", out)
			}
			method := point
			if point == "send" {
				method = "DoGet"
			}
			if n := metricValue(t, ts.srv.metrics.panics.WithLabelValues(method)); n != 1 {
				t.Fatalf("quiver_panics_total{method=%q} = %v", method, n)
			}
		})
	}
}

// metricValue reads a counter or gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
