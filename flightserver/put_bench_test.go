package flightserver

// Benchmarks of small appends through DoPut (issue 14): many concurrent
// writers of 1,000-row batches into one profile, the group commit's case.
//
//	go test ./flightserver/ -run '^$' -bench DoPutAppend -cpuprofile cpu.out

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store"
)

// appendBatch is 1,000 rows of (id int64, name string, score float64).
var appendBatch = sync.OnceValue(func() arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range 1000 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", i%37))
		b.Field(2).(*array.Float64Builder).Append(float64(i) / 7)
	}
	return b.NewRecordBatch()
})

// appendOnce sends one DoPut of rec to the profile cmd names and waits for
// its PutResult.
func appendOnce(c flight.Client, cmd []byte, rec arrow.RecordBatch) error {
	stream, err := c.DoPut(context.Background())
	if err != nil {
		return err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
	if err := w.Write(rec); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// BenchmarkDoPutAppend: W writers append 1,000-row batches to one profile;
// reports appends/s and the p50/p99 latency of an acknowledged append,
// with the small appends of a commit cycle sharing a file (the default)
// and with a file each (shared=off), side by side.
func BenchmarkDoPutAppend(b *testing.B) {
	for _, c := range []struct {
		writers int
		shared  bool
	}{{1, true}, {32, true}, {1, false}, {32, false}} {
		name := fmt.Sprintf("writers=%d", c.writers)
		var opts []store.Option
		if !c.shared {
			name += "/shared=off"
			opts = append(opts, store.WithGroupAppendBytes(0))
		}
		writers := c.writers
		b.Run(name, func(b *testing.B) {
			_, c := benchServer(b, "", opts...)
			cmd, _ := json.Marshal(map[string]any{"path": "bench/appends"})
			rec := appendBatch()
			if err := appendOnce(c, cmd, rec); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			var lats []time.Duration
			work := make(chan struct{})
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range writers {
				wg.Go(func() {
					var mine []time.Duration
					for range work {
						t0 := time.Now()
						if err := appendOnce(c, cmd, rec); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lats = append(lats, mine...)
					mu.Unlock()
				})
			}
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			secs := time.Since(start).Seconds()
			b.StopTimer()
			sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
			if len(lats) > 0 {
				b.ReportMetric(float64(len(lats))/secs, "appends/s")
				b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
