package flightserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/store/maint"
)

// TestPutRacingSweepIsRetryable: a sweep with older_than_s 0 removes the
// temps of puts in progress (their log segment, manifest, version
// directory). Each such put fails UNAVAILABLE (retry), never INTERNAL, and
// without a server path in its message.
func TestPutRacingSweepIsRetryable(t *testing.T) {
	var logs syncBuffer
	ts := startSrv(t, false, WithLogger(zerolog.New(&logs)))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = maint.Sweep(ctx, ts.st, 0)
		}
	}()
	codesSeen := map[codes.Code]int{}
	for i := range 120 {
		rec := strBatch(2000, 20)
		var err error
		if i%2 == 0 {
			_, _, err = putWith(ts.c, fmt.Sprintf("a/%d", i%5), rec)
		} else {
			err = putDescriptor(ts.c, fmt.Sprintf(`{"path":"w/%d","mode":"write"}`, i%7), rec)
		}
		rec.Release()
		code := status.Code(err)
		codesSeen[code]++
		switch {
		case code != codes.OK && code != codes.Unavailable:
			t.Errorf("put %d: %v", i, err)
		case err != nil && strings.Contains(err.Error(), "/tmp"):
			t.Errorf("put %d: a server path in %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	t.Logf("outcomes: %v", codesSeen)
	if t.Failed() {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"cause"`) {
				t.Log(l)
			}
		}
	}
}

// putDescriptor puts rec with a CMD descriptor and returns the put's error.
func putDescriptor(c flight.Client, cmd string, rec arrow.RecordBatch) error {
	stream, err := c.DoPut(context.Background())
	if err != nil {
		return err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(cmd)})
	if err := w.Write(rec); err != nil {
		return err
	}
	_ = w.Close()
	_ = stream.CloseSend()
	_, err = stream.Recv()
	return err
}
