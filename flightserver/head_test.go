package flightserver

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/store/fsys"
)

// TestUnreadableHeadDataLoss: a profile whose .log/HEAD is there but is
// no log head (garbage, a directory, a symbolic link, a file larger than
// any head) is answered DATA_LOSS for reads and puts, with a message that
// names no server path (a link is not an unsafe key path: INVALID_ARGUMENT
// would send the client looking at its request); the data dir's other
// profiles are still listed and served.
func TestUnreadableHeadDataLoss(t *testing.T) {
	for _, kind := range []string{"garbage", "directory", "symlink", "huge"} {
		t.Run(kind, func(t *testing.T) {
			data := t.TempDir()
			c := startPlain(t, data)
			rec := cacheBatch(0, 10)
			defer rec.Release()
			putCmd(t, c, map[string]any{"path": "good", "mode": "write"}, rec)
			putCmd(t, c, map[string]any{"path": "bad", "mode": "write"}, rec)
			putCmd(t, c, map[string]any{"path": "bad"}, rec)
			head := filepath.Join(data, "bad", ".log", "HEAD")
			valid, err := os.ReadFile(head)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(head); err != nil {
				t.Fatal(err)
			}
			switch kind {
			case "garbage":
				err = os.WriteFile(head, []byte("\x00garbage"), 0o644)
			case "directory":
				err = os.Mkdir(head, 0o755)
			case "symlink":
				target := filepath.Join(t.TempDir(), "HEAD")
				if err = os.WriteFile(target, valid, 0o644); err == nil {
					err = os.Symlink(target, head)
				}
			case "huge":
				if err = os.WriteFile(head, valid, 0o644); err == nil {
					err = os.Truncate(head, fsys.MaxReadFile+1)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			c = startPlain(t, data) // a fresh server
			check := func(what string, err error) {
				t.Helper()
				st := status.Convert(err)
				if st.Code() != codes.DataLoss || strings.Contains(st.Message(), data) || strings.Contains(st.Message(), "/tmp") {
					t.Errorf("%s: %v, want DATA_LOSS naming no server path", what, err)
				}
			}
			_, _, err = getAll(t, c, "bad")
			check("read", err)
			check("put", tryPut(c, map[string]any{"path": "bad"}, rec))
			check("write", tryPut(c, map[string]any{"path": "bad", "mode": "write"}, rec))
			_, err = c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"bad"}})
			check("flight info", err)
			if _, rows, err := getAll(t, c, "good"); err != nil || strings.Count(rows, `"id"`) != 10 {
				t.Fatalf("the other profile: %s %v", rows, err)
			}
			ls, err := c.ListFlights(context.Background(), &flight.Criteria{})
			if err != nil {
				t.Fatal(err)
			}
			listed := map[string]int64{}
			for {
				fi, err := ls.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("listing: %v", err)
				}
				listed[strings.Join(fi.FlightDescriptor.Path, "/")] = fi.TotalRecords
			}
			if listed["good"] != 10 {
				t.Fatalf("listing: %v, want good with 10 rows", listed)
			}
		})
	}
}

// tryPut is putCmd that returns the put's error.
func tryPut(c flight.Client, cmd map[string]any, rec arrow.RecordBatch) error {
	stream, err := c.DoPut(context.Background())
	if err != nil {
		return err
	}
	b, _ := json.Marshal(cmd)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b})
	if err := w.Write(rec); err != nil {
		_, rerr := stream.Recv()
		if rerr != nil {
			return rerr
		}
		return err
	}
	_ = w.Close()
	_ = stream.CloseSend()
	_, err = stream.Recv()
	return err
}

// TestMalformedLogLineDataLoss: a put onto a profile whose commit log has
// a line Quiver did not write that way (a blank line, a CRLF, a trailing
// space, a record twice) is answered DATA_LOSS naming the segment by its
// data-dir-relative path, as reads are — not INVALID_ARGUMENT "put
// <profile>", which the io.EOF of the blank line's parse made of it (red
// team round 19, t04). Nothing is written.
func TestMalformedLogLineDataLoss(t *testing.T) {
	for _, c := range []struct {
		name   string
		seg    string
		tamper func(string) string
	}{
		{"blank line at the end", "00000000000000000003.ndjson", func(b string) string { return b + "\n" }},
		{"blank line before an earlier record", "00000000000000000001.ndjson", func(b string) string { return "\n" + b }},
		{"CRLF", "00000000000000000003.ndjson", func(b string) string { return strings.TrimSuffix(b, "\n") + "\r\n" }},
		{"trailing space", "00000000000000000003.ndjson", func(b string) string { return strings.TrimSuffix(b, "\n") + " \n" }},
		{"a record twice", "00000000000000000003.ndjson", func(b string) string { return b + b }},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			c0 := startPlain(t, data)
			rec := cacheBatch(0, 10)
			defer rec.Release()
			for range 3 {
				putCmd(t, c0, map[string]any{"path": "t04/p"}, rec)
			}
			seg := filepath.Join(data, "t04", "p", ".log", c.seg)
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(seg, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seg, []byte(c.tamper(string(b))), 0o644); err != nil {
				t.Fatal(err)
			}
			tampered, _ := os.ReadFile(seg)
			cl := startPlain(t, data) // a fresh server reads the log afresh
			for _, cmd := range []map[string]any{{"path": "t04/p"}, {"path": "t04/p", "mode": "write"}} {
				err := tryPut(cl, cmd, rec)
				st := status.Convert(err)
				if st.Code() != codes.DataLoss || !strings.Contains(st.Message(), "t04/p") || strings.Contains(st.Message(), data) {
					t.Errorf("put %v: %v, want DATA_LOSS naming the profile's log and no server path", cmd, err)
				}
			}
			if _, err := os.Stat(filepath.Join(data, "t04", "p", ".log", "00000000000000000004.ndjson")); err == nil {
				t.Error("a refused put committed a record")
			}
			if after, _ := os.ReadFile(seg); string(after) != string(tampered) {
				t.Error("a refused put changed the tampered segment")
			}
		})
	}
}
