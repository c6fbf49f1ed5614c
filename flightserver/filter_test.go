package flightserver

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// doGetRows reads a ticket to its end, returning the rows or the error.
func doGetRows(c flight.Client, ticket string) (int64, error) {
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(ticket)})
	if err != nil {
		return 0, err
	}
	rdr, err := flight.NewRecordReader(stream)
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

// Filters and limits over the wire: DoGet keeps the rows they select,
// GetFlightInfo's endpoints stream the same, and a bad filter is
// InvalidArgument with a message naming what is wrong, never Internal.
func TestDoGetFilter(t *testing.T) {
	c, _ := start(t)
	rec := strBatch(1000, 8)
	defer rec.Release()
	doPut(t, c, "filtered", rec)
	for ticket, want := range map[string]int64{
		`{"path": "filtered", "filter": {"col": "id", "op": "<", "value": 10}}`:                                                         10,
		`{"path": "filtered", "filter": {"or": [{"col": "id", "op": "in", "value": [1, 5]}, {"col": "id", "op": ">=", "value": 998}]}}`: 4,
		`{"path": "filtered", "limit": 7}`: 7,
		`{"path": "filtered", "limit": 3, "columns": ["s"], "filter": {"col": "id", "op": ">", "value": 500}}`: 3,
	} {
		n, err := doGetRows(c, ticket)
		if err != nil || n != want {
			t.Errorf("%s: %d rows, %v; want %d", ticket, n, err, want)
		}
		info, err := c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(ticket)})
		if err != nil {
			t.Fatalf("%s: GetFlightInfo: %v", ticket, err)
		}
		var sum int64
		for _, ep := range info.Endpoint {
			n, err := doGetRows(c, string(ep.Ticket.Ticket))
			if err != nil {
				t.Fatal(err)
			}
			sum += n
		}
		if sum != want {
			t.Errorf("%s: endpoints stream %d rows, want %d", ticket, sum, want)
		}
	}
	for ticket, want := range map[string]string{
		`{"path": "filtered", "filter": {"col": "nope", "op": "=", "value": 1}}`:       `"nope": no such column`,
		`{"path": "filtered", "filter": {"col": "s", "op": ">", "value": 1}}`:          `"s"`,
		`{"path": "filtered", "filter": {"col": "id", "op": "=", "value": null}}`:      "is_null",
		`{"path": "filtered", "filter": {"substrait": "AAAA"}}`:                        "Substrait",
		`{"path": "filtered", "filter": {"col": "id", "op": "=", "value": 1, "x": 1}}`: `unknown key "x"`,
		`{"path": "filtered", "limit": "ten"}`:                                         "limit",
	} {
		_, err := doGetRows(c, ticket)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("%s: %v, want InvalidArgument mentioning %s", ticket, err, want)
		}
		_, err = c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(ticket)})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetFlightInfo %s: %v, want InvalidArgument", ticket, err)
		}
	}
}

// A read of several profiles streams them as one, and is allowed only
// when the caller may read every one of them.
func TestMultiProfileReadAuthz(t *testing.T) {
	s := startAuth(t, testAuth(t))
	rec := strBatch(3, 8)
	defer rec.Release()
	for _, k := range [][]string{{"sales", "eu"}, {"sales", "us"}, {"hr", "pay"}} {
		if err := putErr(bearer("tok-admin-all"), s.c, k, rec); err != nil {
			t.Fatal(err)
		}
	}
	read := func(tok, ticket string) (int64, error) {
		stream, err := s.c.DoGet(bearer(tok), &flight.Ticket{Ticket: []byte(ticket)})
		if err != nil {
			return 0, err
		}
		rdr, err := flight.NewRecordReader(stream)
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
	if n, err := read("tok-read-sales", `{"prefix": "sales", "source_column": "profile"}`); err != nil || n != 6 {
		t.Fatalf("prefix sales: %d rows, %v", n, err)
	}
	if n, err := read("tok-read-all", `{"prefix": "", "limit": 7}`); err != nil || n != 7 {
		t.Fatalf("every profile, limit 7: %d rows, %v", n, err)
	}
	for _, ticket := range []string{`{"paths": ["sales/eu", "hr/pay"]}`, `{"prefix": ""}`, `{"prefix": "hr"}`} {
		if _, err := read("tok-read-sales", ticket); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s by a sales-only identity: %v, want PermissionDenied", ticket, err)
		}
	}
	info, err := s.c.GetFlightInfo(bearer("tok-read-sales"), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"paths": ["sales/us", "sales/eu"]}`)})
	if err != nil || info.TotalRecords != 6 || len(info.Endpoint) != 2 {
		t.Fatalf("GetFlightInfo of two profiles: %v, %v", info, err)
	}
	if _, err := s.c.GetSchema(bearer("tok-read-sales"), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"prefix": "sales", "source_column": "p"}`)}); err != nil {
		t.Fatalf("GetSchema of a prefix: %v", err)
	}
}
