package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestPoolAllocator(t *testing.T) {
	a := newPoolAllocator()
	for _, size := range []int{0, 1, 100, 4095, 4096, 4097, 10_000, 1 << 20, 3<<20 + 5} {
		b := a.Allocate(size)
		if len(b) != size {
			t.Fatalf("Allocate(%d): len %d", size, len(b))
		}
		for i := range b {
			if b[i] != 0 {
				t.Fatalf("Allocate(%d): byte %d is %d", size, i, b[i])
			}
			b[i] = 0xAB
		}
		grown := a.Reallocate(size*2+1, b)
		for i := range grown {
			want := byte(0xAB)
			if i >= size {
				want = 0
			}
			if grown[i] != want {
				t.Fatalf("Reallocate(%d→%d): byte %d is %x", size, size*2+1, i, grown[i])
			}
		}
		a.Free(grown)
		// A reused buffer is zeroed again.
		again := a.Allocate(size*2 + 1)
		for i := range again {
			if again[i] != 0 {
				t.Fatalf("reused %d: byte %d is %x", size*2+1, i, again[i])
			}
		}
		a.Free(again)
	}
	prev := 0
	for size := 1 << 12; size <= 1<<22; size += 997 {
		c, capacity := class(size)
		if capacity < size || capacity > size+size/4+1 || c < prev || c >= numClasses {
			t.Fatalf("class(%d) = %d, %d (previous class %d)", size, c, capacity, prev)
		}
		if c2, cap2 := class(capacity); c2 != c || cap2 != capacity {
			t.Fatalf("class(%d) = %d, %d; class of its capacity %d, %d", size, c, capacity, c2, cap2)
		}
		prev = c
	}
	if _, c := class(1 << 28); c != 1<<28 || !pooled(make([]byte, 0, 5<<12)) || pooled(make([]byte, 0, 5<<12+8)) {
		t.Error("class bounds")
	}
}

// TestPoolReadsSameData: reads through the pooled allocator (the store's
// default) yield the same data as through Go's allocator, also many at
// once — buffers returned to the pools are never still in use.
func TestPoolReadsSameData(t *testing.T) {
	dir := t.TempDir()
	pooled, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pooled.readMem.(*poolAllocator); !ok {
		t.Fatalf("default read allocator %T", pooled.readMem)
	}
	plain, err := Open(dir, WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "p", Type: arrow.BinaryTypes.String},
	}, nil)
	for f := 0; f < 6; f++ {
		var sb strings.Builder
		sb.WriteString("[")
		for i := 0; i < 3000; i++ {
			if i > 0 {
				sb.WriteString(",")
			}
			id := f*3000 + i
			s := fmt.Sprintf("%q", strings.Repeat(fmt.Sprint(id%13), 1+id%40))
			if id%7 == 0 {
				s = "null"
			}
			fmt.Fprintf(&sb, `{"id": %d, "s": %s, "l": [%d, %d], "p": "%c"}`, id, s, id, -id, 'a'+id%3)
		}
		sb.WriteString("]")
		mode, o := ModeAppend, PutOptions{}
		if f == 0 {
			mode, o.PartitionBy = ModeWrite, []string{"p"}
		}
		put(t, plain, mode, []string{"pool"}, fromJSON(t, sc, sb.String()), o)
	}
	read := func(s *Store) string {
		rdr, err := s.Read(context.Background(), []string{"pool"}, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}, BatchBytes: 16 << 10})
		if err != nil {
			t.Error(err)
			return ""
		}
		defer rdr.Release()
		// Rows, not batches: a read's batch boundaries follow the row
		// size it measured first, which depends on which file's decoder
		// measured first.
		var sb strings.Builder
		for rdr.Next() {
			b, err := rdr.RecordBatch().MarshalJSON()
			if err != nil {
				t.Error(err)
			}
			if rows := strings.TrimSuffix(strings.TrimPrefix(string(b), "["), "]"); rows != "" {
				sb.WriteString(rows)
				sb.WriteString(",")
			}
		}
		if rdr.Err() != nil {
			t.Error(rdr.Err())
		}
		return sb.String()
	}
	want := read(plain)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				if got := read(pooled); got != want {
					t.Errorf("pooled read differs (%d vs %d bytes)", len(got), len(want))
					return
				}
			}
		}()
	}
	wg.Wait()
}
