package flightserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/ipccache"
	"github.com/quiverdb/quiver/store/maint"
)

// cachedServer serves dataDir with an IPC cache in cacheDir, on a checked
// allocator; the client accepts messages of at most recvLimit bytes.
type cachedServer struct {
	c     flight.Client
	srv   *Server
	st    *store.Store
	cache *ipccache.Cache
}

func startCached(t *testing.T, dataDir, cacheDir string, recvLimit int, opts ...Option) *cachedServer {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cache, err := ipccache.Open(cacheDir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dataDir, store.WithAllocator(mem), store.WithCache(cache))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the stop below
		st.Close()
		cache.Close()
		assertFreed(t, mem)
	})
	srv := New(st, append([]Option{WithAllocator(mem)}, opts...)...)
	c := quivertest.MustDial(t, quivertest.ServeInProcess(t, srv), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(recvLimit)))
	return &cachedServer{c: c, srv: srv, st: st, cache: cache}
}

// cacheSchema has schema and field metadata, a partition column, strings
// with nulls and a list.
var cacheSchema = func() *arrow.Schema {
	fm := arrow.NewMetadata([]string{"unit"}, []string{"eur"})
	sm := arrow.NewMetadata([]string{"owner"}, []string{"tests"})
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "region", Type: arrow.BinaryTypes.String},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: fm},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, &sm)
}()

func cacheBatch(start, n int) arrow.RecordBatch {
	var sb strings.Builder
	sb.WriteString("[")
	for i := start; i < start+n; i++ {
		if i > start {
			sb.WriteString(",")
		}
		note := fmt.Sprintf("%q", strings.Repeat("n", i%50))
		if i%9 == 0 {
			note = "null"
		}
		fmt.Fprintf(&sb, `{"id": %d, "region": "%s", "price": %d.5, "note": %s, "tags": [%d]}`, i, []string{"eu", "us", "ap"}[i%3], i, note, i)
	}
	sb.WriteString("]")
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, cacheSchema, strings.NewReader(sb.String()))
	if err != nil {
		panic(err)
	}
	return rec
}

func putCmd(t *testing.T, c flight.Client, cmd map[string]any, rec arrow.RecordBatch) {
	t.Helper()
	stream, err := c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cmd)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	_ = stream.CloseSend()
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
}

// getAll reads a ticket: its schema, its rows as JSON, and the largest
// message body received.
func getAll(t *testing.T, c flight.Client, ticket string) (*arrow.Schema, string, error) {
	t.Helper()
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(ticket)})
	if err != nil {
		return nil, "", err
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return nil, "", err
	}
	defer rdr.Release()
	var rows []json.RawMessage
	for rdr.Next() {
		b, err := rdr.RecordBatch().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var part []json.RawMessage
		if err := json.Unmarshal(b, &part); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, part...)
	}
	if err := rdr.Err(); err != nil && err != io.EOF {
		return rdr.Schema(), "", err
	}
	b, _ := json.Marshal(rows)
	return rdr.Schema(), string(b), nil
}

// TestDoGetFromCache: hot reads from the IPC cache stream exactly what
// cold reads from Parquet stream — schema with its metadata, rows in
// order, projections and partition filters — within the send limit; a
// server with a smaller send limit slices cached batches; a restarted
// server finds the cache.
func TestDoGetFromCache(t *testing.T) {
	data, cdir := t.TempDir(), t.TempDir()
	tickets := []string{
		`{"path": "sales"}`,
		`{"path": "sales", "columns": ["price", "id"]}`,
		`{"path": "sales", "partition": {"region": ["us"]}}`,
		`{"path": "sales", "columns": ["region", "note"], "partition": {"region": ["ap", "eu"]}}`,
	}
	want := map[string]string{}
	t.Run("cold and hot", func(t *testing.T) {
		s := startCached(t, data, cdir, 1<<30)
		for i := 0; i < 4; i++ {
			rec := cacheBatch(i*3000, 3000)
			cmd := map[string]any{"path": "sales"}
			if i == 0 {
				cmd["mode"], cmd["partition_by"] = "write", []string{"region"}
			}
			putCmd(t, s.c, cmd, rec)
			rec.Release()
		}
		// What a server without the cache streams.
		plain := startPlain(t, data)
		for _, tk := range tickets {
			sc, rows, err := getAll(t, plain, tk)
			if err != nil {
				t.Fatal(err)
			}
			want[tk] = rows
			if tk == tickets[0] && !sc.Equal(cacheSchema) {
				// The partition column comes back at its declared place.
				t.Errorf("schema %v", sc)
			}
		}
		// Cold: the first read decodes Parquet and fills the cache.
		for _, tk := range tickets {
			if _, rows, err := getAll(t, s.c, tk); err != nil || rows != want[tk] {
				t.Fatalf("cold %s: %v %s\nwant %s", tk, err, rows, want[tk])
			}
		}
		if st := s.cache.Stats(); st.Entries == 0 || st.Fills == 0 {
			t.Fatalf("cold reads: %+v", st)
		}
		// Hot.
		for _, tk := range tickets {
			sc, rows, err := getAll(t, s.c, tk)
			if err != nil {
				t.Fatal(err)
			}
			if rows != want[tk] {
				t.Errorf("hot %s: %s\nwant %s", tk, rows, want[tk])
			}
			if tk == tickets[0] && (!sc.Equal(cacheSchema) || sc.Field(2).Metadata.String() != cacheSchema.Field(2).Metadata.String()) {
				t.Errorf("hot schema %v", sc)
			}
		}
		// Hot reads at once: each message is read into a pooled buffer
		// that goes back to the pool when gRPC has sent it; one given back
		// early would be overwritten by another read's message.
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					tk := tickets[(g+i)%len(tickets)]
					if _, rows, err := getAll(t, s.c, tk); err != nil || rows != want[tk] {
						errs <- fmt.Errorf("concurrent hot read %s: %v (rows differ: %v)", tk, err, rows != want[tk])
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		st := s.cache.Stats()
		if st.Hits == 0 {
			t.Fatalf("hot reads: %+v", st)
		}
		rec := httptest.NewRecorder()
		s.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		for name, want := range map[string]float64{"quiver_cache_hits_total": float64(st.Hits), "quiver_cache_entries": float64(st.Entries),
			"quiver_cache_misses_total": float64(st.Misses), "quiver_cache_evictions_total": 0, "quiver_cache_bytes": float64(st.Bytes)} {
			var got float64
			found := false
			for _, line := range strings.Split(rec.Body.String(), "\n") {
				if v, ok := strings.CutPrefix(line, name+" "); ok {
					_, err := fmt.Sscan(v, &got)
					found = err == nil
				}
			}
			if !found || got != want {
				t.Errorf("metric %s = %v (found %v), want %v", name, got, found, want)
			}
		}
	})
	// A restarted server with a small send limit: the cached messages are
	// larger, so they are decoded and sliced.
	t.Run("restarted", func(t *testing.T) {
		s := startCached(t, data, cdir, 80<<10, WithMaxSendMsgSize(64<<10))
		for _, tk := range tickets {
			_, rows, err := getAll(t, s.c, tk)
			if err != nil {
				t.Fatal(err)
			}
			if rows != want[tk] {
				t.Errorf("restarted %s differs", tk)
			}
		}
		if st := s.cache.Stats(); st.Hits == 0 || st.Fills != 0 {
			t.Fatalf("restarted: %+v", st)
		}
	})
}

// startPlain serves dataDir without a cache.
func startPlain(t *testing.T, dataDir string) flight.Client {
	t.Helper()
	st, err := store.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return quivertest.MustDial(t, quivertest.ServeInProcess(t, New(st)), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(4<<20)))
}

// TestDoGetCacheKeepsGuarantees: a cached file that is lost fails the
// read with DATA_LOSS; a pinned file of a version retention removed is
// NOT_FOUND — as without the cache.
func TestDoGetCacheKeepsGuarantees(t *testing.T) {
	data, cdir := t.TempDir(), t.TempDir()
	s := startCached(t, data, cdir, 1<<30)
	rec := cacheBatch(0, 500)
	defer rec.Release()
	putCmd(t, s.c, map[string]any{"path": "g", "mode": "write"}, rec)
	putCmd(t, s.c, map[string]any{"path": "g"}, rec)
	fi, err := s.c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	pinned := string(fi.Endpoint[0].Ticket.Ticket)
	for i := 0; i < 2; i++ { // fill, then hit
		if _, _, err := getAll(t, s.c, pinned); err != nil {
			t.Fatal(err)
		}
	}
	if s.cache.Stats().Hits == 0 {
		t.Fatal("not cached")
	}
	// Lost.
	p := filepath.Join(data, "g", "v0", "1.parquet")
	_ = os.Chmod(p, 0o644)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := getAll(t, s.c, pinned); status.Code(err) != codes.DataLoss {
		t.Fatalf("lost file: %v", err)
	}
	// Retired: a new version, the old one removed.
	putCmd(t, s.c, map[string]any{"path": "g", "mode": "write"}, rec)
	if _, err := maint.RemoveOldVersions(context.Background(), s.st, []string{"g"}, 1, 0, "test"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := getAll(t, s.c, pinned); status.Code(err) != codes.NotFound {
		t.Fatalf("retired version: %v", err)
	}
}

// bigBatch is n rows of an id and a 50-byte string.
func bigBatch(n int) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row-%d-%s", i, strings.Repeat("z", 40)))
	}
	return b.NewRecordBatch()
}

// TestDoGetCacheEntryTruncated (red team g06): truncating the cache
// entries while a DoGet streams one (the server blocked on flow control,
// messages read ahead) fails that DoGet with UNAVAILABLE — it does not
// crash the process, as a truncated memory mapping did (SIGBUS in gRPC's
// writer) — and the server goes on serving the data, from Parquet and
// then from a refilled entry.
func TestDoGetCacheEntryTruncated(t *testing.T) {
	data, cdir := t.TempDir(), t.TempDir()
	s := startCached(t, data, cdir, 1<<30, WithMaxSendMsgSize(64<<10))
	rec := bigBatch(200_000)
	defer rec.Release()
	putCmd(t, s.c, map[string]any{"path": "c/big", "mode": "write"}, rec)
	_, want, err := getAll(t, s.c, "c/big") // fills
	if err != nil {
		t.Fatal(err)
	}
	hits := s.cache.Stats().Hits
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := s.c.DoGet(ctx, &flight.Ticket{Ticket: []byte("c/big")})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if !rdr.Next() {
		t.Fatal(rdr.Err())
	}
	if s.cache.Stats().Hits == hits {
		t.Fatal("not streamed from the cache")
	}
	time.Sleep(200 * time.Millisecond) // the server fills the window and blocks
	des, err := os.ReadDir(cdir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".arrows") {
			if err := os.Truncate(filepath.Join(cdir, de.Name()), 4096); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no cache entry")
	}
	rows := rdr.RecordBatch().NumRows()
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	if status.Code(rdr.Err()) != codes.Unavailable || rows >= rec.NumRows() {
		t.Fatalf("read %d rows of %d: %v", rows, rec.NumRows(), rdr.Err())
	}
	if strings.Contains(rdr.Err().Error(), cdir) {
		t.Errorf("error shows the server path: %v", rdr.Err())
	}
	for range 2 { // decoded and refilled, then from the cache
		if _, got, err := getAll(t, s.c, "c/big"); err != nil || got != want {
			t.Fatalf("after the truncation: %v", err)
		}
	}
	if st := s.cache.Stats(); st.Corrupt != 1 || st.Entries != 1 {
		t.Errorf("stats %+v", st)
	}
}
