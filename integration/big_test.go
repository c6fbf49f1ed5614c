package integration

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/client"
)

// peakRSS reads a process's peak resident set (VmHWM) from /proc.
func peakRSS(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(sc.Text(), "VmHWM:")), nil
		}
	}
	return "", fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// TestBigDoGet puts 1 GiB (16 puts of 64 MiB) and reads it back in one
// DoGet, reporting the server's peak RSS after the put and after the read.
// It runs only with QUIVER_BIG=1 (it needs ~2 GB of disk and a minute):
//
//	QUIVER_BIG=1 go test -run TestBigDoGet -v ./integration/
func TestBigDoGet(t *testing.T) {
	if os.Getenv("QUIVER_BIG") != "1" {
		t.Skip("set QUIVER_BIG=1 to run the 1 GB DoGet")
	}
	s := startServer(t)
	sc := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	const rows = 4 << 20 // 64 MiB per batch
	const puts = 16
	for p := 0; p < puts; p++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		nb, xb := b.Field(0).(*array.Int64Builder), b.Field(1).(*array.Float64Builder)
		nb.Reserve(rows)
		xb.Reserve(rows)
		for i := 0; i < rows; i++ {
			n := int64(p*rows + i)
			nb.UnsafeAppend(n)
			xb.UnsafeAppend(float64(n) * 1.5)
		}
		rec := b.NewRecordBatch()
		b.Release()
		mustPut(t, s.client, "big", client.PutOptions{}, rec)
		rec.Release()
	}
	afterPut, _ := peakRSS(s.Pid())
	start := time.Now()
	tb, err := countRows(t, s, "big")
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	afterGet, _ := peakRSS(s.Pid())
	if tb != rows*puts {
		t.Fatalf("read %d rows, want %d", tb, rows*puts)
	}
	t.Logf("1 GiB DoGet: %d rows in %s (%.0f MiB/s); server peak RSS after puts %s, after DoGet %s",
		tb, elapsed.Round(time.Millisecond), 1024/elapsed.Seconds(), afterPut, afterGet)
}

// countRows reads a ticket to the end, keeping no batch.
func countRows(t *testing.T, s *server, ticket string) (int64, error) {
	rdr, err := s.client.ReadTicket(ctxT(t), []byte(ticket))
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return n, rdr.Err()
}
