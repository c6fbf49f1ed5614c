package store_test

// Benchmarks of the put and read paths, and the memory evidence of issue 2:
// writing and reading 100 MB and 1 GB of generated data must not need more
// memory for the larger size.
//
//	go test ./store/ -run '^$' -bench 'Put|Read|Append|Snapshot' -benchmem
//	go test ./store/ -run '^$' -bench Memory -benchtime 1x      # 100MB and 1GB
//	go test ./store/ -run '^$' -bench Memory/100MB -benchtime 1x -short
//
// BenchmarkAppendConcurrent and BenchmarkSnapshot measure the commit log:
// concurrent small appends sharing commit cycles (group commit), and a
// snapshot of a profile with a long history, warm (the log view is kept and
// extended) and cold (a new process parses the whole log).
//
// BenchmarkMemory runs each size in its own helper process (the test binary
// re-executed, see TestHelperProcess), so that the process's peak RSS
// (VmHWM in /proc/self/status, which only grows over a process's life) is
// that size's alone. The helper samples runtime.MemStats.HeapAlloc every
// 10 ms for the peak heap, and resets VmHWM between the write and the read
// (echo 5 > /proc/self/clear_refs) to report both peaks.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/quiverdb/quiver/store"
)

const benchBatchRows = 8192

// benchSchema: ten mixed columns, about 80 bytes a row in Arrow.
var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int32},
	{Name: "account", Type: arrow.PrimitiveTypes.Int64},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	{Name: "ratio", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "region", Type: arrow.BinaryTypes.String},
	{Name: "sku", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// benchTemplates are a few pre-generated batches the generator cycles
// through (with a fresh id column each time), so generating costs little
// and holds little memory.
var benchTemplates = sync.OnceValue(func() []arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(1, 2))
	regions := []string{"eu-west", "eu-north", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south"}
	const hexd = "0123456789abcdef"
	var out []arrow.RecordBatch
	for k := 0; k < 8; k++ {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
		sku := make([]byte, 16)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		for i := 0; i < benchBatchRows; i++ {
			bld.Field(0).(*array.Int64Builder).Append(0)
			bld.Field(1).(*array.Int32Builder).Append(int32(rng.IntN(1000)))
			bld.Field(2).(*array.Int64Builder).Append(rng.Int64N(1_000_000))
			bld.Field(3).(*array.Float64Builder).Append(float64(rng.IntN(1_000_000)) / 100)
			if rng.IntN(20) == 0 {
				bld.Field(4).(*array.Float32Builder).AppendNull()
			} else {
				bld.Field(4).(*array.Float32Builder).Append(rng.Float32())
			}
			bld.Field(5).(*array.StringBuilder).Append(regions[rng.IntN(len(regions))])
			for j := range sku {
				sku[j] = hexd[rng.IntN(16)]
			}
			bld.Field(6).(*array.StringBuilder).Append(string(sku))
			bld.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(k*benchBatchRows+i)*1000 + rng.Int64N(1000)))
			bld.Field(8).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
			if rng.IntN(10) == 0 {
				bld.Field(9).(*array.Float64Builder).AppendNull()
			} else {
				bld.Field(9).(*array.Float64Builder).Append(rng.NormFloat64())
			}
		}
		out = append(out, bld.NewRecordBatch())
		bld.Release()
	}
	return out
})

// batchBytes is the Arrow size of a batch (its buffers' lengths).
func batchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}

// genReader yields generated batches until about target Arrow bytes.
type genReader struct {
	refs   atomic.Int64
	target int64
	done   int64 // bytes yielded
	rows   int64
	next   int
	cur    arrow.RecordBatch
}

func newGenReader(target int64) *genReader {
	r := &genReader{target: target}
	r.refs.Store(1)
	return r
}

func (r *genReader) Retain() { r.refs.Add(1) }
func (r *genReader) Release() {
	if r.refs.Add(-1) == 0 && r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}
func (r *genReader) Schema() *arrow.Schema          { return benchSchema }
func (r *genReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *genReader) Record() arrow.RecordBatch      { return r.cur }
func (r *genReader) Err() error                     { return nil }

func (r *genReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done >= r.target {
		return false
	}
	tpl := benchTemplates()[r.next%8]
	r.next++
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.Reserve(benchBatchRows)
	for i := int64(0); i < benchBatchRows; i++ {
		ib.UnsafeAppend(r.rows + i)
	}
	ids := ib.NewArray()
	ib.Release()
	cols := append([]arrow.Array{ids}, tpl.Columns()[1:]...)
	r.cur = array.NewRecordBatch(benchSchema, cols, benchBatchRows)
	ids.Release()
	r.rows += benchBatchRows
	r.done += batchBytes(r.cur)
	return true
}

// benchSizes: the put/read matrix.
var benchSizes = []int64{1 << 20, 16 << 20, 64 << 20}

func sizeName(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return strconv.FormatInt(n>>30, 10) + "GB"
	}
	return strconv.FormatInt(n>>20, 10) + "MB"
}

// benchPut writes size bytes once; it returns the Arrow bytes written.
func benchPut(b *testing.B, s *store.Store, keys []string, size int64, mode store.Mode) int64 {
	r := newGenReader(size)
	defer r.Release()
	if _, err := s.Put(context.Background(), keys, r, store.PutOptions{Mode: mode}); err != nil {
		b.Fatal(err)
	}
	return r.done
}

// benchRead reads the latest version; it returns rows and Arrow bytes read
// (which differ a little from those written: a column read without nulls
// has no validity bitmap).
func benchRead(tb testing.TB, s *store.Store, keys []string) (int64, int64) {
	rdr, err := s.Read(context.Background(), keys, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: -1}})
	if err != nil {
		tb.Fatal(err)
	}
	defer rdr.Release()
	var rows, n int64
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
		n += batchBytes(rdr.RecordBatch())
	}
	if err := rdr.Err(); err != nil {
		tb.Fatal(err)
	}
	return rows, n
}

func BenchmarkPut(b *testing.B) {
	benchTemplates()
	for _, mode := range []store.Mode{store.ModeWrite, store.ModeAppend} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%s", mode, sizeName(size)), func(b *testing.B) {
				s, err := store.Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				keys := []string{"bench", "put"}
				b.SetBytes(newGenReaderBytes(size))
				b.ReportAllocs()
				for b.Loop() {
					benchPut(b, s, keys, size, mode)
				}
			})
		}
	}
}

// newGenReaderBytes is the Arrow bytes a generator of target yields.
func newGenReaderBytes(target int64) int64 {
	one := batchBytes(benchTemplates()[0])
	return (target + one - 1) / one * one
}

func BenchmarkRead(b *testing.B) {
	benchTemplates()
	for _, size := range benchSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			s, err := store.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			keys := []string{"bench", "read"}
			n := benchPut(b, s, keys, size, store.ModeWrite)
			wantRows := n / batchBytes(benchTemplates()[0]) * benchBatchRows
			b.SetBytes(n) // Arrow bytes as written
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if rows, _ := benchRead(b, s, keys); rows != wantRows {
					b.Fatalf("read %d rows, wrote %d", rows, wantRows)
				}
			}
		})
	}
}

// benchResult is what a bench helper prints.
type benchResult struct {
	Bytes        int64   `json:"bytes"`
	Rows         int64   `json:"rows"`
	DiskBytes    int64   `json:"disk_bytes"`
	WriteSec     float64 `json:"write_s"`
	ReadSec      float64 `json:"read_s"`
	WriteHeapMB  float64 `json:"write_peak_heap_mb"`
	ReadHeapMB   float64 `json:"read_peak_heap_mb"`
	WriteRSSMB   float64 `json:"write_peak_rss_mb"`
	ReadRSSMB    float64 `json:"read_peak_rss_mb"` // -1 if VmHWM could not be reset
	ProcessRSSMB float64 `json:"process_peak_rss_mb"`
}

// heapSampler records the peak of runtime.MemStats.HeapAlloc.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > h.peak.Load() {
				h.peak.Store(ms.HeapAlloc)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() float64 {
	close(h.stop)
	<-h.done
	return float64(h.peak.Load()) / (1 << 20)
}

// vmHWM reads the process's peak RSS in MiB.
func vmHWM() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return -1
			}
			return kb / 1024
		}
	}
	return -1
}

// resetHWM resets VmHWM to the current RSS (Linux ≥ 4.0).
func resetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// helperBench writes a.SizeBytes of generated data as one write, reads it
// back, and prints a benchResult.
func helperBench(dir string, a helperArgs) error {
	benchTemplates()
	runtime.GC()
	s, err := store.Open(dir)
	if err != nil {
		return err
	}
	keys := []string{"bench", "memory"}
	res := benchResult{}
	h := startHeapSampler()
	t0 := time.Now()
	r := newGenReader(a.SizeBytes)
	_, err = s.Put(context.Background(), keys, r, store.PutOptions{Mode: store.ModeWrite})
	res.Bytes, res.Rows = r.done, r.rows
	r.Release()
	if err != nil {
		return err
	}
	res.WriteSec = time.Since(t0).Seconds()
	res.WriteHeapMB = h.Stop()
	res.WriteRSSMB = vmHWM()
	res.ProcessRSSMB = res.WriteRSSMB
	sn, err := s.Snapshot(context.Background(), keys, store.SnapshotOptions{Version: -1})
	if err != nil {
		return err
	}
	res.DiskBytes = sn.Bytes()

	debug.FreeOSMemory() // return the write's heap, so the read's RSS peak is its own
	reset := resetHWM()
	h = startHeapSampler()
	t0 = time.Now()
	rows, n := benchRead(&helperTB{}, s, keys)
	res.ReadSec = time.Since(t0).Seconds()
	res.ReadHeapMB = h.Stop()
	if rows != res.Rows {
		return fmt.Errorf("read %d rows (%d bytes), wrote %d rows", rows, n, res.Rows)
	}
	res.ReadRSSMB = -1
	if reset {
		res.ReadRSSMB = vmHWM()
	}
	res.ProcessRSSMB = max(res.ProcessRSSMB, vmHWM())
	helperPrint(res)
	return nil
}

// helperTB lets benchRead run in a helper process.
type helperTB struct{ testing.TB }

func (helperTB) Fatal(args ...any) { fmt.Fprintln(os.Stderr, args...); os.Exit(1) }

func BenchmarkMemory(b *testing.B) {
	for _, size := range []int64{100 << 20, 1 << 30} {
		b.Run(sizeName(size), func(b *testing.B) {
			if size > 100<<20 && testing.Short() {
				b.Skip("1 GB skipped in -short mode")
			}
			var res benchResult
			for i := 0; i < b.N; i++ {
				res = runBenchHelper(b, size)
			}
			b.SetBytes(res.Bytes)
			mb := float64(res.Bytes) / (1 << 20)
			b.ReportMetric(mb/res.WriteSec, "write-MB/s")
			b.ReportMetric(mb/res.ReadSec, "read-MB/s")
			b.ReportMetric(max(res.WriteHeapMB, res.ReadHeapMB), "peak-heap-MB")
			b.ReportMetric(res.WriteHeapMB, "write-peak-heap-MB")
			b.ReportMetric(res.ReadHeapMB, "read-peak-heap-MB")
			b.ReportMetric(res.ProcessRSSMB, "peak-RSS-MB")
			b.ReportMetric(res.WriteRSSMB, "write-peak-RSS-MB")
			b.ReportMetric(res.ReadRSSMB, "read-peak-RSS-MB")
			b.ReportMetric(float64(res.DiskBytes)/(1<<20), "parquet-MB")
			b.Logf("%s: %d rows, %.0f MiB Arrow, %.0f MiB Parquet; write %.1fs, read %.1fs; peak heap write %.0f / read %.0f MiB; peak RSS write %.0f / read %.0f MiB",
				sizeName(size), res.Rows, mb, float64(res.DiskBytes)/(1<<20), res.WriteSec, res.ReadSec, res.WriteHeapMB, res.ReadHeapMB, res.WriteRSSMB, res.ReadRSSMB)
		})
	}
}

func runBenchHelper(b *testing.B, size int64) benchResult {
	b.Helper()
	h := startHelperOut(b, "bench", b.TempDir(), helperArgs{SizeBytes: size})
	var res benchResult
	var got bool
	for _, line := range h {
		if err := json.Unmarshal([]byte(line), &res); err == nil && res.Bytes > 0 {
			got = true
		}
	}
	if !got {
		b.Fatal("bench helper printed no result")
	}
	return res
}

// startHelperOut runs a helper and returns its stdout lines; it fails the
// benchmark if the helper fails.
func startHelperOut(b *testing.B, mode, dir string, a helperArgs) []string {
	b.Helper()
	args, _ := json.Marshal(a)
	cmd := helperCommand(mode, dir, string(args))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("bench helper: %v\n%s", err, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	return lines
}

// BenchmarkAppendConcurrent: 16 goroutines append one small batch each,
// over and over, to one profile; the commit cycles are shared (group
// commit), so the cost per append falls well below one lock, one segment
// and one sync each. It reports the mean records per log segment.
func BenchmarkAppendConcurrent(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			dir := b.TempDir()
			s, err := store.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			keys := []string{"bench", "appends"}
			r := mpBatch(0, 0, 10)
			if _, err := s.Put(context.Background(), keys, r, store.PutOptions{Mode: store.ModeWrite}); err != nil {
				b.Fatal(err)
			}
			r.Release()
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := mpBatch(1, seq.Add(1), 10)
					_, err := s.Put(context.Background(), keys, r, store.PutOptions{})
					r.Release()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			ents, err := os.ReadDir(filepath.Join(dir, "bench", "appends", ".log"))
			if err != nil {
				b.Fatal(err)
			}
			segs := 0
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".ndjson") {
					segs++
				}
			}
			b.ReportMetric(float64(seq.Load()+1)/float64(segs), "records/segment")
		})
	}
}

// BenchmarkSnapshot: the snapshot of the latest version of a profile with
// 1000 appends, warm (the store keeps the parsed log and reads only what
// follows it) and cold (a new store, as a restarted server: the whole log
// is parsed once).
func BenchmarkSnapshot(b *testing.B) {
	dir := b.TempDir()
	s, err := store.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	keys := []string{"bench", "history"}
	const appends = 1000
	for i := 0; i <= appends; i++ {
		o := store.PutOptions{}
		if i == 0 {
			o.Mode = store.ModeWrite
		}
		r := mpBatch(0, int64(i), 1)
		if _, err := s.Put(context.Background(), keys, r, o); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	check := func(s *store.Store) {
		sn, err := s.Snapshot(context.Background(), keys, store.SnapshotOptions{Version: -1})
		if err != nil {
			b.Fatal(err)
		}
		if len(sn.Files) != appends+1 {
			b.Fatalf("%d files, want %d", len(sn.Files), appends+1)
		}
	}
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			check(s)
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cold, err := store.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			check(cold)
		}
	})
}

// BenchmarkPutPartitioned writes 64 MB partitioned by region (8 values,
// every batch holding all of them in random order): the split path.
func BenchmarkPutPartitioned(b *testing.B) {
	benchTemplates()
	const size = 64 << 20
	s, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(newGenReaderBytes(size))
	b.ReportAllocs()
	for b.Loop() {
		r := newGenReader(size)
		if _, err := s.Put(context.Background(), []string{"bench", "parts"}, r, store.PutOptions{Mode: store.ModeWrite, PartitionBy: []string{"region"}}); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}
