package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
)

func TestErrorCodes(t *testing.T) {
	s := startServer(t, "--lock-timeout", "200ms")
	c := s.client
	b := batch(0, 3)
	defer b.Release()
	mustPut(t, c, "sales/orders", client.PutOptions{}, b)

	ctx := ctxT(t)
	gets := []struct {
		ticket string
		want   codes.Code
	}{
		{`{"path": "sales/orders"`, codes.InvalidArgument},
		{`{"path": "sales/orders", "colums": ["id"]}`, codes.InvalidArgument},
		{`../etc/passwd`, codes.InvalidArgument},
		{`sales/.hidden`, codes.InvalidArgument},
		{`no/such`, codes.NotFound},
		{`sales`, codes.NotFound},
		{`{"path": "sales/orders", "version": 9}`, codes.NotFound},
		{`{"path": "sales/orders", "columns": ["nope"]}`, codes.InvalidArgument},
		{`{"path": "sales/orders", "partition": {"region": "eu"}}`, codes.InvalidArgument},
		{`{"path": "sales/orders", "version": 0, "files": ["v0/7.parquet"]}`, codes.NotFound},
	}
	for _, g := range gets {
		_, err := get(ctx, c, []byte(g.ticket))
		if code(err) != g.want {
			t.Errorf("DoGet %s: %v, want %s", g.ticket, err, g.want)
		}
		if err != nil && strings.Contains(err.Error(), s.dataDir) {
			t.Errorf("DoGet %s: error names the server path: %v", g.ticket, err)
		}
	}
	if _, err := c.Schema(ctx, client.ReadRequest{Path: "no/such"}); code(err) != codes.NotFound {
		t.Errorf("GetSchema of a missing profile: %v", err)
	}
	// Raw: a malformed descriptor.
	if _, err := s.flight.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":`)}); code(err) != codes.InvalidArgument {
		t.Errorf("GetFlightInfo bad CMD: %v", err)
	}

	// Puts: a schema that does not fit, a bad mode, a format mix-up, a
	// profile inside a profile. Raw: the descriptors are what is tested.
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.BinaryTypes.String}}, nil)
	ob := array.NewRecordBuilder(memory.DefaultAllocator, other)
	ob.Field(0).(*array.StringBuilder).Append("a")
	orec := ob.NewRecordBatch()
	ob.Release()
	defer orec.Release()
	puts := []struct {
		name string
		desc *flight.FlightDescriptor
		rec  arrow.RecordBatch
		want codes.Code
	}{
		{"schema mismatch", pathDesc("sales", "orders"), orec, codes.InvalidArgument},
		{"bad mode", cmdDesc(map[string]any{"path": "sales/orders", "mode": "upsert"}), b, codes.InvalidArgument},
		{"nested", pathDesc("sales", "orders", "deeper"), b, codes.InvalidArgument},
		{"format", cmdDesc(map[string]any{"path": "sales/orders", "format": "csv"}), b, codes.FailedPrecondition},
		{"bad key", pathDesc("a=b"), b, codes.InvalidArgument},
	}
	for _, p := range puts {
		if _, err := rawPut(ctx, s.flight, p.desc, p.rec); code(err) != p.want {
			t.Errorf("put %s: %v, want %s", p.name, err, p.want)
		}
	}

	// Actions: unknown, bad body, missing profile.
	if _, err := action(c, t, "drop-everything", nil); code(err) != codes.Unimplemented {
		t.Errorf("unknown action: %v", err)
	}
	if _, err := action(c, t, "list-versions", map[string]any{"pth": "x"}); code(err) != codes.InvalidArgument {
		t.Errorf("bad body: %v", err)
	}
	if _, err := action(c, t, "list-versions", map[string]any{"path": "no/such"}); code(err) != codes.NotFound {
		t.Errorf("list-versions of a missing profile: %v", err)
	}

	// A held manifest lock: a write times out with Unavailable while its
	// owner lives; break-lock refuses to break it; once its owner is
	// provably gone, break-lock frees it, and a writer that meets such a
	// lock takes it over by itself.
	host, _ := os.Hostname()
	plant := func(pid int) {
		lock, _ := json.Marshal(map[string]any{"host": host, "pid": pid, "time": time.Now().UTC()})
		s.Storage.WriteFile(t, "sales/orders/manifest.json.write_lock", lock)
	}
	plant(os.Getpid()) // this test process: alive
	if _, err := put(ctx, c, "sales/orders", client.PutOptions{Mode: catalog.ModeWrite}, b); code(err) != codes.Unavailable {
		t.Errorf("write under a held lock: %v, want Unavailable", err)
	}
	var bl struct {
		Broken bool   `json:"broken"`
		Reason string `json:"reason"`
	}
	mustAction(t, c, "break-lock", map[string]any{"path": "sales/orders"}, &bl)
	if bl.Broken {
		t.Fatalf("break-lock of a live owner's lock: %+v", bl)
	}
	plant(1 << 22) // no such process
	mustAction(t, c, "break-lock", map[string]any{"path": "sales/orders"}, &bl)
	if !bl.Broken {
		t.Fatalf("break-lock of a dead owner's lock: %+v", bl)
	}
	mustPut(t, c, "sales/orders", client.PutOptions{Mode: catalog.ModeWrite}, b)
	plant(1 << 22)
	mustPut(t, c, "sales/orders", client.PutOptions{Mode: catalog.ModeWrite}, b)
}

func TestMessageLimit(t *testing.T) {
	s := startServer(t, "--max-recv-msg-size", "1048576")
	big := batch(0, 200_000) // ~5 MB in one message
	defer big.Release()
	// Raw: the batch must go as one message (the Go client would slice
	// it under its own limit, were that lower).
	_, err := rawPut(ctxT(t), s.flight, pathDesc("big"), big)
	// grpc-go writes this status itself the moment the message arrives:
	// "grpc: received message larger than max (N vs. LIMIT)".
	if code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("oversized batch: %v, want ResourceExhausted", err)
	}
	if _, err := os.Stat(filepath.Join(s.dataDir, "big", "manifest.json")); err == nil {
		t.Fatal("a rejected put created a profile")
	}
	small := batch(0, 1000)
	defer small.Release()
	mustPut(t, s.client, "big", client.PutOptions{}, small)
}

// TestLargeBatch: a 64 MiB batch goes in as one message with the default
// limit, and comes back to a Go client with grpc's default 4 MiB receive
// limit because DoGet slices it.
func TestLargeBatch(t *testing.T) {
	s := startServer(t)
	c := connect(t, s.addr, client.WithMaxBatchBytes(0), client.WithMaxRecvMsgSize(4<<20))
	sc := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	const rows = 8 << 20 // 64 MiB of int64
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	bld.Reserve(rows)
	for i := int64(0); i < rows; i++ {
		bld.UnsafeAppend(i)
	}
	arr := bld.NewArray()
	bld.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{arr}, rows)
	arr.Release()
	defer rec.Release()
	pr := mustPut(t, c, "wide", client.PutOptions{}, rec)
	if pr.Rows != rows {
		t.Fatalf("put %d rows", pr.Rows)
	}
	tb := mustGet(t, c, "wide")
	if tb.rows != rows {
		t.Fatalf("read %d rows", tb.rows)
	}
	var next int64
	for _, r := range tb.recs {
		for _, v := range r.Column(0).(*array.Int64).Int64Values() {
			if v != next {
				t.Fatalf("row %d is %d", next, v)
			}
			next++
		}
	}
}

// TestPartitionPruning writes 50 partitions, then scrambles every data file
// but one partition's: a read of that partition succeeds (so no other file
// was opened), and a full read fails (so a scrambled file would be noticed).
func TestPartitionPruning(t *testing.T) {
	s := startServer(t)
	var regions []string
	for i := 0; i < 50; i++ {
		regions = append(regions, fmt.Sprintf("p%02d", i))
	}
	b := batch(0, 500, regions...)
	defer b.Release()
	pr := mustPut(t, s.client, "parts", client.PutOptions{Mode: catalog.ModeWrite, PartitionBy: []string{"region"}}, b)
	if len(pr.Files) != 50 {
		t.Fatalf("%d files", len(pr.Files))
	}
	var keep string
	for _, f := range pr.Files {
		if strings.Contains(f.Path, "region=p07/") {
			keep = f.Path
			continue
		}
		if err := os.WriteFile(filepath.Join(s.dataDir, "parts", filepath.FromSlash(f.Path)), []byte("not parquet"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if keep == "" {
		t.Fatal("no file for partition p07")
	}
	tb := mustGet(t, s.client, `{"path":"parts","partition":{"region":"p07"}}`)
	if tb.rows != 10 {
		t.Fatalf("partition p07: %d rows", tb.rows)
	}
	for _, r := range tb.recs {
		col := r.Column(r.Schema().FieldIndices("region")[0]).(*array.String)
		for i := 0; i < col.Len(); i++ {
			if col.Value(i) != "p07" {
				t.Fatalf("row of partition %q", col.Value(i))
			}
		}
	}
	plan, err := s.client.Plan(ctxT(t), client.ReadRequest{Path: "parts", Partition: map[string][]string{"region": {"p07"}}})
	if err != nil {
		t.Fatal(err)
	}
	var tk struct {
		Files []string `json:"files"`
	}
	if len(plan.Endpoints) != 1 || json.Unmarshal(plan.Endpoints[0].Ticket.Ticket, &tk) != nil || !slices.Equal(tk.Files, []string{keep}) || plan.TotalRecords != 10 {
		t.Fatalf("planned %d endpoints, files %v, records %d", len(plan.Endpoints), tk.Files, plan.TotalRecords)
	}
	if _, err := get(ctxT(t), s.client, []byte("parts")); err == nil {
		t.Fatal("a full read of scrambled files succeeded")
	}
}

// TestEndpointSnapshot: endpoints planned before new appends and a new
// version still return exactly the planned data.
func TestEndpointSnapshot(t *testing.T) {
	s := startServer(t, "--endpoint-bytes", "1")
	for i := int64(0); i < 3; i++ {
		b := batch(i*10, 10)
		mustPut(t, s.client, "snap", client.PutOptions{}, b)
		b.Release()
	}
	plan, err := s.client.Plan(ctxT(t), client.ReadRequest{Path: "snap"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Endpoints) != 3 || plan.TotalRecords != 30 {
		t.Fatalf("%d endpoints, %d records", len(plan.Endpoints), plan.TotalRecords)
	}
	b := batch(1000, 5)
	defer b.Release()
	mustPut(t, s.client, "snap", client.PutOptions{}, b)                        // lands in the same version
	mustPut(t, s.client, "snap", client.PutOptions{Mode: catalog.ModeWrite}, b) // a new version
	var ids []int64
	for _, ep := range plan.Endpoints {
		ids = append(ids, ints(t, mustGet(t, s.client, string(ep.Ticket.Ticket)), "id")...)
	}
	want := make([]int64, 30)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("endpoints returned %v", ids)
	}
	if got := mustGet(t, s.client, "snap"); got.rows != 5 {
		t.Fatalf("latest has %d rows", got.rows)
	}
}

// TestCancelledPut: a client that cancels a put midway leaves no new data
// file, commit record or manifest change; sweep removes what temps remain.
func TestCancelledPut(t *testing.T) {
	s := startServer(t)
	b := batch(0, 10_000)
	defer b.Release()
	mustPut(t, s.client, "c", client.PutOptions{}, b)
	before := dataFiles(t, s.dataDir)

	// Raw: a stream cut off midway, never closed.
	for _, mode := range []string{"append", "write"} {
		ctx, cancel := context.WithCancel(ctxT(t))
		stream, err := s.flight.DoPut(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := flight.NewRecordWriter(stream, ipc.WithSchema(b.Schema()))
		w.SetFlightDescriptor(cmdDesc(map[string]any{"path": "c", "mode": mode}))
		for i := 0; i < 20; i++ {
			if err := w.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(300 * time.Millisecond) // let the server write some of it
		cancel()
		_ = w.Close()
	}
	time.Sleep(500 * time.Millisecond)
	if after := dataFiles(t, s.dataDir); !slices.Equal(after, before) {
		t.Fatalf("cancelled puts left a trace:\nbefore %v\nafter  %v", before, after)
	}
	if got := mustGet(t, s.client, "c"); got.rows != 10_000 {
		t.Fatalf("%d rows after cancelled puts", got.rows)
	}
	mustAction(t, s.client, "sweep", map[string]any{"older_than_s": 0}, nil)
	var vr struct {
		OK       bool              `json:"ok"`
		Problems []json.RawMessage `json:"problems"`
	}
	mustAction(t, s.client, "verify", map[string]any{"path": "c"}, &vr)
	if !vr.OK {
		t.Fatalf("verify after sweep: %s", vr.Problems)
	}
}

// TestConcurrent: 32 DoPut and 32 DoGet streams at once on one server.
func TestConcurrent(t *testing.T) {
	s := startServer(t)
	const n, rows = 32, 1000
	seed := batch(-rows, rows)
	mustPut(t, s.client, "busy", client.PutOptions{}, seed)
	seed.Release()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			b := batch(int64(i*rows), rows)
			defer b.Release()
			pr, err := put(ctxT(t), s.client, "busy", client.PutOptions{}, b)
			if err == nil && pr.Rows != rows {
				err = fmt.Errorf("put %d: %d rows", i, pr.Rows)
			}
			errs <- err
		}(i)
		go func() {
			defer wg.Done()
			tb, err := get(ctxT(t), s.client, []byte("busy"))
			if err == nil {
				if tb.rows%rows != 0 || tb.rows < rows {
					err = fmt.Errorf("read %d rows: not whole appends", tb.rows)
				}
				tb.release()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	ids := ints(t, mustGet(t, s.client, "busy"), "id")
	if len(ids) != (n+1)*rows {
		t.Fatalf("%d rows, want %d", len(ids), (n+1)*rows)
	}
	slices.Sort(ids)
	for i, v := range ids {
		if v != int64(i-rows) {
			t.Fatalf("ids: position %d holds %d", i, v)
		}
	}
}
