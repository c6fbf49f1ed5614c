package flightserver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/store"
)

// TestCompressedPutOfCompressibleData: valid batches written by arrow-go's
// IPC writer with body compression (zstd, lz4), of data that compresses
// far below a bit per row (a column of zeros, an all-null column), are
// stored. The row-count bound judges a batch by its declared uncompressed
// sizes, not by its compressed body (which refused them as malformed); the
// seeds null-rows-2^40, bomb-compressed-1TiB and negative-uncompressed-size
// stay refused (TestDoPutSeedOutcomes).
func TestCompressedPutOfCompressibleData(t *testing.T) {
	ts := startSrv(t, true)
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	zeros := func(n int) arrow.RecordBatch {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues(make([]int64, n), nil)
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(sc, []arrow.Array{col}, int64(n))
	}
	nulls := func(n int) arrow.RecordBatch {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendNulls(n)
		col := b.NewArray()
		defer col.Release()
		return array.NewRecordBatch(sc, []arrow.Array{col}, int64(n))
	}
	tests := []struct {
		name  string
		rec   arrow.RecordBatch
		codec ipc.Option
	}{
		{"zeros-zstd", zeros(1_000_000), ipc.WithZstd()},
		{"zeros-lz4", zeros(1_000_000), ipc.WithLZ4()},
		{"nulls-zstd", nulls(300_000), ipc.WithZstd()},
		{"nulls-lz4", nulls(300_000), ipc.WithLZ4()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.rec.Release()
			cr, body, err := putWith(ts.c, tt.name, tt.rec, tt.codec)
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if cr.Rows != tt.rec.NumRows() {
				t.Fatalf("committed %d rows, want %d", cr.Rows, tt.rec.NumRows())
			}
			// The test is only meaningful if the body is below the old
			// bound of a bit per row.
			if 8*int64(body)+slackRows >= tt.rec.NumRows() {
				t.Fatalf("body of %d bytes for %d rows: not compressed below a bit per row", body, tt.rec.NumRows())
			}
		})
	}
}

// putWith puts rec to path with the IPC writer options opts; it answers the
// commit record and the largest message body sent.
func putWith(c flight.Client, path string, rec arrow.RecordBatch, opts ...ipc.Option) (*store.CommitRecord, int, error) {
	stream, err := c.DoPut(context.Background())
	if err != nil {
		return nil, 0, err
	}
	bs := &bodySizer{FlightService_DoPutClient: stream}
	w := flight.NewRecordWriter(bs, append([]ipc.Option{ipc.WithSchema(rec.Schema())}, opts...)...)
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{path}})
	if err := w.Write(rec); err != nil {
		return nil, 0, err
	}
	_ = w.Close()
	_ = stream.CloseSend()
	res, err := stream.Recv()
	if err != nil {
		return nil, bs.max, err
	}
	var cr store.CommitRecord
	if err := json.Unmarshal(res.AppMetadata, &cr); err != nil {
		return nil, bs.max, status.Convert(err).Err()
	}
	return &cr, bs.max, nil
}

// bodySizer remembers the largest message body a DoPut sent.
type bodySizer struct {
	flight.FlightService_DoPutClient
	max int
}

func (b *bodySizer) Send(d *flight.FlightData) error {
	b.max = max(b.max, len(d.DataBody))
	return b.FlightService_DoPutClient.Send(d)
}

// TestCompressedAttacksRefused: what the compressed-size bound must not let
// through. A null column of 2^40 rows in a compressed stream (no buffers,
// nothing decoded), and the committed FuzzDoPut seeds whose compressed
// buffers claim 1 TiB, a negative size or a size that does not match, are
// refused; nothing is stored and the budget is whole again.
func TestCompressedAttacksRefused(t *testing.T) {
	ts := startSrv(t, false, WithMaxRecvMsgSize(1<<20), WithMaxInflightBytes(8<<20))
	sc := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.Null, Nullable: true}}, nil)
	col := array.NewNull(1 << 40)
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, 1<<40)
	col.Release()
	defer rec.Release()
	for _, codec := range []ipc.Option{ipc.WithZstd(), ipc.WithLZ4()} {
		if _, _, err := putWith(ts.c, "nulls", rec, codec); status.Code(err) != codes.InvalidArgument {
			t.Errorf("compressed null column of 2^40 rows: %v, want InvalidArgument", err)
		}
	}
	want := map[string]codes.Code{
		"bomb-compressed-1TiB":       codes.ResourceExhausted,
		"negative-uncompressed-size": codes.InvalidArgument,
		"compressed-size-mismatch":   codes.InvalidArgument,
		"null-rows-2^40":             codes.InvalidArgument,
	}
	for name, code := range want {
		b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDoPut", name))
		if err != nil {
			t.Fatal(err)
		}
		lit := strings.TrimSpace(strings.TrimPrefix(string(b), "go test fuzz v1\n"))
		lit = strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")")
		data, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msgs := decodeFrames([]byte(data))
		msgs[0].FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"seed"}}
		if got, err := sendPut(context.Background(), ts.c, msgs); got != code {
			t.Errorf("%s: %v (%v), want %v", name, got, err, code)
		}
	}
	if _, _, err := ts.st.Versions(context.Background(), []string{"seed"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused put left something: %v", err)
	}
	if n := ts.srv.budget.used.Load(); n != 0 {
		t.Errorf("%d bytes of the in-flight budget still reserved", n)
	}
}
