package par

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

func TestForEach(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 8, 100} {
		var seen [50]atomic.Int32
		err := ForEach(len(seen), workers, func(i int) error {
			seen[i].Add(1)
			if i%10 == 3 {
				return errors.New("bad " + string(rune('a'+i/10)))
			}
			return nil
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("workers %d: item %d done %d times", workers, i, seen[i].Load())
			}
		}
		if err == nil || !strings.Contains(err.Error(), "bad a") || !strings.Contains(err.Error(), "bad e") {
			t.Errorf("workers %d: errors %v, want all five joined", workers, err)
		}
	}
	if err := ForEach(0, 4, func(int) error { panic("never") }); err != nil {
		t.Error(err)
	}
}

// A worker's panic reaches the caller's goroutine, after every worker
// stopped, with the worker's stack.
func TestForEachPanicReachesCaller(t *testing.T) {
	var done atomic.Int32
	defer func() {
		v := recover()
		p, ok := v.(Panic)
		if !ok || p.Value != "boom" || !strings.Contains(string(p.Stack), "par_test.go") {
			t.Fatalf("recovered %#v, want a Panic of boom with its stack", v)
		}
		if done.Load() != 99 {
			t.Errorf("%d items done when the panic was raised again, want 99", done.Load())
		}
	}()
	_ = ForEach(100, 4, func(i int) error {
		if i == 37 {
			panic("boom")
		}
		done.Add(1)
		return nil
	})
	t.Fatal("ForEach returned")
}
