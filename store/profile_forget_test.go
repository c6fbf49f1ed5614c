package store

import (
	"context"
	"sync"
	"testing"
)

// TestForgetDuringAppends: forgetting a profile's in-memory state while
// appends to it are staged and committed loses no acknowledged append and
// commits none twice: a put still holding the old state commits as
// another process would, under the same manifest lock.
func TestForgetDuringAppends(t *testing.T) {
	s, _ := newTestStore(t)
	keys := []string{"forget", "me"}
	put(t, s, ModeWrite, keys, ids(0), PutOptions{})
	const writers, each = 4, 15
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.Forget(keys)
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				put(t, s, ModeAppend, keys, ids(int64(1+w*each+i)), PutOptions{})
			}
		}()
	}
	wg.Wait()
	close(stop)
	rdr, err := s.Read(context.Background(), keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	seen := map[int64]int{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		col := rec.Column(0)
		for i := range col.Len() {
			v, _ := rec.Column(0).GetOneForMarshal(i).(int64)
			seen[v]++
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v <= writers*each; v++ {
		if seen[v] != 1 {
			t.Errorf("row %d read %d times, want once", v, seen[v])
		}
	}
	if len(seen) != writers*each+1 {
		t.Errorf("%d distinct rows, want %d", len(seen), writers*each+1)
	}
}
