package flightserver

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestBudgetAllocatorWaits: a decompression that fits in the budget but
// finds it held by other streams waits for room as a receive does (red
// team round 17's j09: refused at once, though 40,000 times smaller than
// the budget), is refused as busy once the wait runs out, and one larger
// than the whole budget is refused at once.
func TestBudgetAllocatorWaits(t *testing.T) {
	b := newBudget("data", "--max-inflight-bytes", 100, 2*time.Second, newMetrics())
	if err := b.acquire(context.Background(), 80); err != nil { // another stream's reservation
		t.Fatal(err)
	}
	a := &budgetAllocator{Allocator: memory.NewGoAllocator(), b: b, ctx: context.Background()}
	go func() {
		time.Sleep(50 * time.Millisecond)
		b.release(80)
	}()
	buf := a.Allocate(50)
	if len(buf) != 50 || a.exceeded.Load() || a.busy.Load() != nil {
		t.Fatalf("allocation that waited for room: %d bytes, exceeded %v, busy %v", len(buf), a.exceeded.Load(), a.busy.Load())
	}
	a.Free(buf)
	a.close()
	if n := b.used.Load(); n != 0 {
		t.Fatalf("%d bytes still charged", n)
	}

	short := newBudget("data", "--max-inflight-bytes", 100, 20*time.Millisecond, newMetrics())
	if err := short.acquire(context.Background(), 80); err != nil {
		t.Fatal(err)
	}
	a = &budgetAllocator{Allocator: memory.NewGoAllocator(), b: short, ctx: context.Background()}
	func() {
		defer func() { _ = recover() }()
		a.Allocate(50)
		t.Fatal("an allocation that never found room returned")
	}()
	if p := a.busy.Load(); p == nil || status.Code(*p) != codes.ResourceExhausted {
		t.Fatalf("busy: %v, want RESOURCE_EXHAUSTED", p)
	}
	func() {
		defer func() { _ = recover() }()
		a.Allocate(101)
		t.Fatal("an allocation larger than the budget returned")
	}()
	if !a.exceeded.Load() {
		t.Fatal("an allocation larger than the budget is not marked exceeded")
	}
	a.close()
}
