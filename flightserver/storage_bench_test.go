package flightserver

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/internal/s3test"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
)

// BenchmarkStorage compares the data directory on a local disk with one
// on S3 (versitygw on loopback, internal/s3test: the protocol's cost,
// not a network's) through an in-process server: a DoPut of about 64 MiB
// as one new version, a DoGet of it, and small appends (1,000 rows) by
// one and by eight writers, with their p50/p99 latency.
func BenchmarkStorage(b *testing.B) {
	var srv *s3test.Server
	storages := []struct {
		name string
		new  func(b *testing.B) fsys.FS
	}{
		{"local", func(b *testing.B) fsys.FS {
			l, err := fsys.NewLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			return l
		}},
		{"s3", func(b *testing.B) fsys.FS {
			if srv == nil {
				srv = s3test.Start(b)
			}
			return srv.FS(b)
		}},
	}
	for _, st := range storages {
		b.Run(st.name, func(b *testing.B) {
			f := st.new(b)
			_, c := benchServerFS(b, f)
			b.Run("DoPut", func(b *testing.B) {
				b.SetBytes(benchBytes())
				for b.Loop() {
					benchPut(b, c, map[string]any{"path": "bench/put", "mode": "write"})
				}
			})
			b.Run("DoGet", func(b *testing.B) {
				benchPut(b, c, map[string]any{"path": "bench/get", "mode": "write"})
				_, n := benchGet(b, c, `{"path": "bench/get"}`)
				b.SetBytes(n)
				b.ResetTimer()
				for b.Loop() {
					benchGet(b, c, `{"path": "bench/get"}`)
				}
			})
			for _, writers := range []int{1, 8} {
				b.Run(fmt.Sprintf("Append/writers=%d", writers), func(b *testing.B) {
					benchAppends(b, c, fmt.Sprintf("bench/appends%d", writers), writers)
				})
			}
		})
	}
}

// benchServerFS is benchServer over the storage f.
func benchServerFS(b *testing.B, f fsys.FS) (*store.Store, flight.Client) {
	b.Helper()
	return benchServer(b, "storage", store.WithFS(f))
}

// benchAppends has writers append b.N 1,000-row batches to path and
// reports appends/s and the p50/p99 latency of an acknowledged append.
func benchAppends(b *testing.B, c flight.Client, path string, writers int) {
	cmd, _ := json.Marshal(map[string]any{"path": path})
	rec := appendBatch()
	if err := appendOnce(c, cmd, rec); err != nil {
		b.Fatal(err)
	}
	lats := make(chan time.Duration, b.N)
	work := make(chan struct{})
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	for range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range work {
				t0 := time.Now()
				if err := appendOnce(c, cmd, rec); err != nil {
					b.Error(err)
					return
				}
				lats <- time.Since(t0)
			}
		}()
	}
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	for range writers {
		<-done
	}
	secs := time.Since(start).Seconds()
	b.StopTimer()
	close(lats)
	var all []time.Duration
	for d := range lats {
		all = append(all, d)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	b.ReportMetric(float64(b.N)/secs, "appends/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}
