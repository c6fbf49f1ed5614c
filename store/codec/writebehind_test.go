package codec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/poison"
)

// slowSink takes its time over large writes (so that writes behind queue
// up) and fails with ENOSPC once it holds failAt bytes (0: never).
type slowSink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	failAt int
}

func (s *slowSink) Write(b []byte) (int, error) {
	if len(b) >= hashAsideMin {
		time.Sleep(3 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAt > 0 && s.buf.Len()+len(b) > s.failAt {
		return 0, syscall.ENOSPC
	}
	return s.buf.Write(b)
}

// wideBatch is rows rows of incompressible integers and strings: column
// chunks of megabytes, written behind.
func wideBatch(mem memory.Allocator, rows int, seed uint64) arrow.RecordBatch {
	sc := schemaOf(field("id", arrow.PrimitiveTypes.Int64, false), field("x", arrow.PrimitiveTypes.Float64, true), field("s", arrow.BinaryTypes.String, true))
	rng := rand.New(rand.NewPCG(seed, 7))
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(rng.Int64())
		if i%11 == 0 {
			b.Field(1).AppendNull()
			b.Field(2).AppendNull()
			continue
		}
		b.Field(1).(*array.Float64Builder).Append(rng.Float64())
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%x-%d", rng.Uint64(), i))
	}
	return b.NewRecordBatch()
}

// writeWide writes batches of wideBatch through a FileWriter on w and
// returns it closed (or the first error).
func writeWide(w interface{ Write([]byte) (int, error) }, mem memory.Allocator, batches int) (*FileWriter, error) {
	var fw *FileWriter
	var err error
	for i := range batches {
		rec := wideBatch(memory.DefaultAllocator, 40_000, uint64(i))
		if fw == nil {
			if fw, err = NewFileWriter(w, rec.Schema(), WriterOptions{Allocator: mem, RowGroupRows: 60_000}); err != nil {
				rec.Release()
				return nil, err
			}
		}
		err = fw.Write(rec)
		rec.Release()
		if err == nil && i%2 == 1 {
			err = fw.EndRowGroup()
		}
		if err != nil {
			return fw, err
		}
	}
	return fw, fw.Close()
}

// The parallel writer's column chunks are written behind the encoder: the
// file is byte for byte the one written in step, though every buffer is
// poisoned when freed and the sink is slow; its SHA-256 and size are the
// bytes'; the memory is all given back.
func TestWriteBehind(t *testing.T) {
	var plain bytes.Buffer
	fw, err := writeWide(&plain, memory.DefaultAllocator, 6)
	if err != nil {
		t.Fatal(err)
	}
	if fw.out.queued == 0 {
		t.Fatal("nothing was written behind")
	}

	checked := memory.NewCheckedAllocator(poison.Allocator{Allocator: memory.NewGoAllocator()})
	var slow slowSink
	fw, err = writeWide(&slow, checked, 6)
	if err != nil {
		t.Fatal(err)
	}
	checked.AssertSize(t, 0)
	got := slow.buf.Bytes()
	if !bytes.Equal(got, plain.Bytes()) {
		t.Fatalf("written behind a slow sink with poisoned frees: %d bytes, in step %d (differ)", len(got), plain.Len())
	}
	sum := sha256.Sum256(got)
	if fw.SHA256() != hex.EncodeToString(sum[:]) || fw.Size() != int64(len(got)) {
		t.Fatalf("SHA-256 %s size %d, the bytes' %x %d", fw.SHA256(), fw.Size(), sum, len(got))
	}
	mem := memory.DefaultAllocator
	back := readBack(t, context.Background(), mem, got, fw.Schema())
	defer back.Release()
	if back.NumRows() != 240_000 {
		t.Fatalf("read back %d rows", back.NumRows())
	}
	want := wideBatch(mem, 40_000, 5)
	defer want.Release()
	tail := back.NewSlice(200_000, 240_000)
	defer tail.Release()
	if !array.RecordEqual(tail, want) {
		t.Fatal("the last batch read back differs")
	}
}

// A write behind that fails fails the file (Write or Close, with the
// sink's error, not the data's), and Abort returns with nothing held.
func TestWriteBehindError(t *testing.T) {
	for _, failAt := range []int{1 << 20, 3 << 20, 5 << 20} {
		t.Run(fmt.Sprint(failAt), func(t *testing.T) {
			checked := memory.NewCheckedAllocator(poison.Allocator{Allocator: memory.NewGoAllocator()})
			fw, err := writeWide(&slowSink{failAt: failAt}, checked, 6)
			if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrInvalid) {
				t.Fatalf("sink full at %d: %v", failAt, err)
			}
			fw.Abort()
			checked.AssertSize(t, 0)
		})
	}
}

// Abort while writes are behind drops them and returns once none runs.
func TestWriteBehindAbort(t *testing.T) {
	checked := memory.NewCheckedAllocator(poison.Allocator{Allocator: memory.NewGoAllocator()})
	var slow slowSink
	rec := wideBatch(memory.DefaultAllocator, 100_000, 1)
	defer rec.Release()
	fw, err := NewFileWriter(&slow, rec.Schema(), WriterOptions{Allocator: checked})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.EndRowGroup(); err != nil {
		t.Fatal(err)
	}
	fw.Abort()
	checked.AssertSize(t, 0)
	slow.mu.Lock()
	n := slow.buf.Len()
	slow.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	slow.mu.Lock()
	defer slow.mu.Unlock()
	if slow.buf.Len() != n {
		t.Fatal("a write behind ran after Abort returned")
	}
}
