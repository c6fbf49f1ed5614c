package flightserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/quiverdb/quiver/internal/flightwire"
	"github.com/quiverdb/quiver/internal/poison"
	"github.com/quiverdb/quiver/internal/quivertest"
	"github.com/quiverdb/quiver/store"
)

// pooledSchema has a partition column, strings whose length follows the
// row, a list, and a dictionary column whose dictionary alone is a message
// of more than recvPooledMin (the reader's memo keeps it across batches).
var pooledSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "region", Type: arrow.BinaryTypes.String},
	{Name: "note", Type: arrow.BinaryTypes.String},
	{Name: "tags", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	{Name: "word", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
}, nil)

// pooledWords is the dictionary of the word column (about 1.4 MiB).
var pooledWords = func() []string {
	w := make([]string, 20000)
	for i := range w {
		w[i] = fmt.Sprintf("word-%05d-%s", i, strings.Repeat("w", 60))
	}
	return w
}()

// pooledNote is row id's note.
func pooledNote(id int64) string {
	return fmt.Sprintf("%d:%s", id, strings.Repeat("n", 100+int(id%97)))
}

// pooledBatch is rows start..start+n-1 (10,000 rows: a message of about
// 2 MiB, and its dictionary's of 1.4 MiB).
func pooledBatch(start, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, pooledSchema)
	defer b.Release()
	tags := b.Field(3).(*array.ListBuilder)
	words := b.Field(4).(*array.BinaryDictionaryBuilder)
	if err := words.InsertStringDictValues(array.NewStringData(stringsData(pooledWords))); err != nil {
		panic(err)
	}
	for id := start; id < start+n; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append([]string{"eu", "us", "ap", "af"}[id%4])
		b.Field(2).(*array.StringBuilder).Append(pooledNote(id))
		tags.Append(true)
		tags.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{int32(id), int32(-id)}, nil)
		if err := words.AppendString(pooledWords[id%int64(len(pooledWords))]); err != nil {
			panic(err)
		}
	}
	return b.NewRecordBatch()
}

// stringsData is the ArrayData of a string array of vals.
func stringsData(vals []string) arrow.ArrayData {
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	defer sb.Release()
	sb.AppendValues(vals, nil)
	a := sb.NewStringArray()
	defer a.Release()
	a.Data().Retain()
	return a.Data()
}

// putBatches puts recs in one stream with cmd.
func putBatches(c flight.Client, cmd map[string]any, recs ...arrow.RecordBatch) error {
	stream, err := c.DoPut(context.Background())
	if err != nil {
		return err
	}
	b, _ := json.Marshal(cmd)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(pooledSchema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b})
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			if _, rerr := stream.Recv(); rerr != nil {
				return rerr // (the server's status)
			}
			return err
		}
	}
	_ = w.Close()
	_ = stream.CloseSend()
	_, err = stream.Recv()
	return err
}

// readPooled reads path back, checking every row against the generator:
// it returns the ids, sorted.
func readPooled(t *testing.T, c flight.Client, path string) []int64 {
	t.Helper()
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(`{"path": "` + path + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var ids []int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		id := col("id").(*array.Int64)
		region, note := col("region").(*array.String), col("note").(*array.String)
		tags := col("tags").(*array.List)
		tv := tags.ListValues().(*array.Int32)
		word := col("word").(*array.Dictionary)
		wv := word.Dictionary().(*array.String)
		for i := range int(rec.NumRows()) {
			v := id.Value(i)
			lo, hi := tags.ValueOffsets(i)
			got := fmt.Sprint(region.Value(i), note.Value(i), tv.Int32Values()[lo:hi], wv.Value(word.GetValueIndex(i)))
			want := fmt.Sprint([]string{"eu", "us", "ap", "af"}[v%4], pooledNote(v), []int32{int32(v), int32(-v)}, pooledWords[v%int64(len(pooledWords))])
			if got != want {
				t.Fatalf("%s row %d: %.80q, want %.80q", path, v, got, want)
			}
			ids = append(ids, v)
		}
	}
	if err := rdr.Err(); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// TestPooledReceiveKeepsEveryRow: batches received into pooled buffers
// (recvpool.go) reach the store intact whichever way it holds them — a
// file written as they come, a partitioned write's spill, small appends
// held for their commit cycle's shared file, a dictionary the IPC reader
// keeps across batches — while other streams reuse the buffers their
// batches were released from. Freed buffers are poisoned in tests
// (poison.On), so a buffer handed back while any of its rows is still in
// use comes back as garbage here. And every buffer is given back once
// the puts are done (none kept by a reference never released).
func TestPooledReceiveKeepsEveryRow(t *testing.T) {
	if !poison.On {
		t.Fatal("freed buffers are not poisoned in this test binary")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	st, err := store.Open(t.TempDir(), store.WithAllocator(mem), store.WithGroupAppendBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertFreed(t, mem) })
	srv := New(st, WithAllocator(mem))
	c := quivertest.MustDial(t, quivertest.ServeInProcess(t, srv, quivertest.Graceful()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	taken0, given0 := recvTaken.Load(), recvGiven.Load()

	const perBatch, batches = 20000, 4
	cases := []struct {
		path string
		cmd  map[string]any
	}{
		{"pooled/file", map[string]any{"mode": "write"}},
		{"pooled/parts", map[string]any{"mode": "write", "partition_by": []string{"region"}}},
		{"pooled/grouped", nil}, // appends, each held for its cycle's shared file
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cases)*batches)
	for ci, tc := range cases {
		for b := range batches {
			wg.Go(func() {
				cmd := map[string]any{"path": tc.path}
				for k, v := range tc.cmd {
					cmd[k] = v
				}
				start := int64(ci*1_000_000 + b*perBatch)
				recs := []arrow.RecordBatch{pooledBatch(start, perBatch/2), pooledBatch(start+perBatch/2, perBatch/2)}
				defer recs[0].Release()
				defer recs[1].Release()
				if tc.cmd == nil {
					errs[ci*batches+b] = putBatches(c, cmd, recs...)
					return
				}
				// writes: one stream of all of this case's batches (b 0),
				// the others append to it once it exists.
				if b > 0 {
					return
				}
				var all []arrow.RecordBatch
				for j := range int64(batches * 2) {
					r := pooledBatch(start+j*perBatch/2, perBatch/2)
					defer r.Release()
					all = append(all, r)
				}
				errs[ci*batches+b] = putBatches(c, cmd, all...)
			})
		}
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	for ci, tc := range cases {
		ids := readPooled(t, c, tc.path)
		if len(ids) != batches*perBatch || ids[0] != int64(ci*1_000_000) || ids[len(ids)-1] != int64(ci*1_000_000+batches*perBatch-1) {
			t.Fatalf("%s: %d rows from %v to %v, want %d", tc.path, len(ids), ids[0], ids[len(ids)-1], batches*perBatch)
		}
	}
	// (a put's reader is released as its handler returns, after the
	// client has its answer)
	taken, given := recvTaken.Load()-taken0, recvGiven.Load()-given0
	for end := time.Now().Add(5 * time.Second); given != taken && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		taken, given = recvTaken.Load()-taken0, recvGiven.Load()-given0
	}
	if taken < int64(batches*4) || given != taken {
		t.Errorf("%d received buffers taken from the pool and %d given back, want at least %d, all back", taken, given, batches*4)
	}
}

// rawBytesCodec sends []byte messages as they are (a client writing
// arbitrary FlightData) and receives into *[]byte.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return "proto" }

func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// rawPut sends msgs (encoded FlightData) as one DoPut and returns the
// call's status.
func rawPut(t *testing.T, addr string, msgs ...[]byte) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawBytesCodec{}), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	s, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/arrow.flight.protocol.FlightService/DoPut")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := s.SendMsg(m); err != nil {
			break // (the server answered already: its status follows)
		}
	}
	_ = s.CloseSend()
	var out []byte
	for {
		if err := s.RecvMsg(&out); err != nil {
			return err
		}
	}
}

// TestPooledReceiveRefusesMalformed: a large message (received into a
// pooled buffer) that is not protobuf, or whose batch body is cut short,
// is refused INVALID_ARGUMENT, commits nothing, and its buffer comes back.
func TestPooledReceiveRefusesMalformed(t *testing.T) {
	mem0 := memory.NewCheckedAllocator(memory.NewGoAllocator())
	st, err := store.Open(t.TempDir(), store.WithAllocator(mem0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertFreed(t, mem0) })
	srv := New(st, WithAllocator(mem0))
	addr := quivertest.ServeInProcess(t, srv, quivertest.Graceful())
	rec := pooledBatch(0, 10000)
	defer rec.Release()
	msgs := putMessages(t, rec) // schema (with p/x), dictionary, batch
	if len(msgs[len(msgs)-1]) < recvPooledMin {
		t.Fatalf("the batch message is %d bytes: not pooled", len(msgs[len(msgs)-1]))
	}
	var fd flight.FlightData
	if err := flightwire.Unmarshal(msgs[len(msgs)-1], &fd); err != nil {
		t.Fatal(err)
	}
	fd.DataBody = fd.DataBody[:len(fd.DataBody)-1]
	cut, err := proto.Marshal(&fd)
	if err != nil {
		t.Fatal(err)
	}
	for name, last := range map[string][]byte{
		"not protobuf":  bytes.Repeat([]byte{0xff}, 2<<20),
		"body cut":      cut,
		"garbage batch": append(append([]byte(nil), msgs[len(msgs)-1][:64]...), bytes.Repeat([]byte{0xa5}, 2<<20)...),
	} {
		t.Run(name, func(t *testing.T) {
			taken0, given0 := recvTaken.Load(), recvGiven.Load()
			err := rawPut(t, addr, append(append([][]byte(nil), msgs[:len(msgs)-1]...), last)...)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("answered %v, want InvalidArgument", err)
			}
			if recvTaken.Load() == taken0 {
				t.Fatal("the message was not received into a pooled buffer")
			}
			for end := time.Now().Add(5 * time.Second); recvTaken.Load()-taken0 != recvGiven.Load()-given0; {
				if time.Now().After(end) {
					t.Fatalf("%d buffers taken, %d given back", recvTaken.Load()-taken0, recvGiven.Load()-given0)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	if _, _, err := st.Versions(context.Background(), []string{"p", "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("p/x after the refused puts: %v, want not found", err)
	}
}
