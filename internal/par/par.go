// Package par runs the independent parts of one piece of work on several
// goroutines without letting a panic in one of them end the process.
package par

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Panic is a panic of a worker goroutine, raised again on the goroutine
// that called ForEach, with the stack where it happened.
type Panic struct {
	Value any
	Stack []byte
}

func (p Panic) String() string { return fmt.Sprintf("%v\n%s", p.Value, p.Stack) }

// ForEach calls fn(i) for every i in [0, n) on up to workers goroutines
// (the caller's among them) and joins the errors. A panic of fn is raised
// again on the calling goroutine (as a Panic) once all have stopped, so
// that the caller's recover turns it into an error: on a goroutine of its
// own it would end the process.
func ForEach(n, workers int, fn func(i int) error) error {
	errs := make([]error, n)
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		panicV *Panic
	)
	work := func() {
		defer wg.Done()
		defer func() {
			if v := recover(); v != nil {
				mu.Lock()
				if panicV == nil {
					panicV = &Panic{Value: v, Stack: debug.Stack()}
				}
				mu.Unlock()
			}
		}()
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			errs[i] = fn(i)
		}
	}
	w := max(1, min(workers, n))
	wg.Add(w)
	for range w - 1 {
		go work()
	}
	work()
	wg.Wait()
	if panicV != nil {
		panic(*panicV)
	}
	return errors.Join(errs...)
}
