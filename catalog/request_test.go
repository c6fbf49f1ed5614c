package catalog

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/store"
)

func TestParseTicket(t *testing.T) {
	cases := []struct {
		in   string
		want *Request
	}{
		{`sales/orders`, &Request{Keys: []string{"sales", "orders"}, Version: Latest}},
		{"  {\"path\":\"sales/orders\"}\n", &Request{Keys: []string{"sales", "orders"}, Version: Latest}},
		{`{"path":"sales/orders","version":3}`, &Request{Keys: []string{"sales", "orders"}, Version: 3}},
		{`{"keys":["sales","orders"],"version":"v2"}`, &Request{Keys: []string{"sales", "orders"}, Version: 2}},
		{`{"path":"a","version":"latest"}`, &Request{Keys: []string{"a"}, Version: Latest}},
		{`{"path":"a","version":"7"}`, &Request{Keys: []string{"a"}, Version: 7}},
		{`{"path":"a","partition":{"region":"eu","n":[1,2],"f":null,"b":true}}`, &Request{Keys: []string{"a"}, Version: Latest,
			Partition: map[string][]string{"region": {"eu"}, "n": {"1", "2"}, "f": {HiveNull}, "b": {"true"}}}},
		{`{"path":"a","columns":["id","x"]}`, &Request{Keys: []string{"a"}, Version: Latest, Columns: []string{"id", "x"}}},
		{`{"path":"a","version":0,"files":[]}`, &Request{Keys: []string{"a"}, Version: 0, Files: []string{}}},
	}
	for _, c := range cases {
		got, err := ParseTicket([]byte(c.in))
		if err != nil {
			t.Errorf("ParseTicket(%q): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseTicket(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestParseTicketErrors(t *testing.T) {
	for _, in := range []string{
		``, `   `, `{`, `{"path":"a"`, `{"path":"a"} x`, `{}`, `{"path":"a","keys":["a"]}`,
		`{"path":"../etc"}`, `{"path":".hidden"}`, `{"path":"a","version":-1}`, `{"path":"a","version":"x"}`,
		`{"path":"a","partiton":{}}`, `{"path":"a","mode":"write"}`, `{"path":"a","partition":{"r":[]}}`,
		`{"path":"a","partition":{"r":{"x":1}}}`, `{"path":"a","columns":[""]}`, "a\x00b", "\xff\xfe", `a\b`, `a=b`,
		`{"path":"a","version":01}`,
		// Red team F12/F19: a bare path is taken as sent; field names are
		// exact and given once; a pinned file is listed once.
		"a/p ", " a/p", "a/p\n", "a/p\u00a0", `{"Path":"a/p"}`, `{"path":"b/q","PATH":"a/p"}`,
		`{"path":"b/q","path":"a/p"}`, `{"path":"a/p","files":["v0/0.parquet","v0/0.parquet"]}`,
		"z/safe\u202eexe.txt", "z/a\u0085b",
		// Red team round 24's y03: invisible characters.
		"sales/or\u200bders", "sales/orders\u2060", `{"path":"sales/or\u00adders"}`, "sales/or\u2029ders",
	} {
		_, err := ParseTicket([]byte(in))
		if err == nil {
			t.Errorf("ParseTicket(%q): no error", in)
			continue
		}
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, store.ErrInvalidKey) && !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("ParseTicket(%q): %v is neither ErrInvalid nor an invalid key", in, err)
		}
	}
}

func TestTicketRoundTrip(t *testing.T) {
	r := &Request{Keys: []string{"sales", "orders"}, Version: 4, Partition: map[string][]string{"region": {"eu", "us"}},
		Columns: []string{"id"}, Files: []string{"v4/region=eu/0.parquet"}}
	got, err := ParseTicket(EncodeTicket(r))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: got %+v, want %+v", got, r)
	}
}

func TestParseDescriptor(t *testing.T) {
	got, err := ParseDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"sales", "orders"}})
	if err != nil || !reflect.DeepEqual(got.Keys, []string{"sales", "orders"}) {
		t.Fatalf("PATH: %+v %v", got, err)
	}
	got, err = ParseDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(
		`{"path":"sales/orders","mode":"write","partition_by":["region"],"schema_version":"1.2.0","metadata":{"run":7},"request_id":"r1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := &Request{Keys: []string{"sales", "orders"}, Version: Latest, Mode: store.ModeWrite, PartitionBy: []string{"region"},
		SchemaVersion: "1.2.0", Metadata: []byte(`{"run":7}`), RequestID: "r1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CMD: got %+v, want %+v", got, want)
	}
	if o := got.PutOptions(); o.Mode != store.ModeWrite || o.RequestID != "r1" {
		t.Fatalf("PutOptions: %+v", o)
	}
	for _, d := range []*flight.FlightDescriptor{
		nil,
		{Type: flight.DescriptorPATH},
		{Type: flight.DescriptorPATH, Path: []string{"a", ".."}},
		{Type: flight.DescriptorUNKNOWN},
		{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":"a","mode":"upsert"}`)},
		{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":"a","partition_by":["r"]}`)},
		{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":"a","metadata":[1]}`)},
		{Type: flight.DescriptorCMD, Cmd: []byte(`{"path":"a","bogus":1}`)},
	} {
		if _, err := ParseDescriptor(d); err == nil {
			t.Errorf("ParseDescriptor(%v): no error", d)
		}
	}
}

func TestParseAction(t *testing.T) {
	a, err := ParseAction(ActionRemoveOldVersions, []byte(`{"path":"a/b","keep":2,"grace_s":0}`))
	if err != nil || a.Keep != 2 || a.Grace == nil || *a.Grace != 0 || a.Path() != "a/b" {
		t.Fatalf("remove-old-versions: %+v %v", a, err)
	}
	a, err = ParseAction(ActionVerify, nil)
	if err != nil || a.Keys != nil || a.Prefix != nil {
		t.Fatalf("verify {}: %+v %v", a, err)
	}
	a, err = ParseAction(ActionVerify, []byte(`{"prefix":"sales"}`))
	if err != nil || !reflect.DeepEqual(a.Prefix, []string{"sales"}) {
		t.Fatalf("verify prefix: %+v %v", a, err)
	}
	a, err = ParseAction(ActionVerify, []byte(`{"prefix":"sales","sample":0.1,"seed":7}`))
	if err != nil || a.Sample != 0.1 || a.Seed != 7 {
		t.Fatalf("verify sample: %+v %v", a, err)
	}
	a, err = ParseAction(ActionSweep, []byte(`{"older_than_s":1.5}`))
	if err != nil || a.OlderThan == nil || a.OlderThan.Seconds() != 1.5 {
		t.Fatalf("sweep: %+v %v", a, err)
	}
	bad := []struct{ typ, body string }{
		{"nope", `{}`},
		{ActionListVersions, `{}`},
		{ActionListVersions, `{"path":"a","keep":1}`},
		{ActionRemoveOldVersions, `{"path":"a","keep":0}`},
		{ActionRemoveOldVersions, `{"path":"a","grace_s":-1}`},
		{ActionSweep, `{"path":"a"}`},
		{ActionVerify, `{"path":"a","prefix":"b"}`},
		{ActionVerify, `{"sample":0}`},
		{ActionVerify, `{"sample":1.5}`},
		{ActionLineage, `{"path":"a","sample":0.5}`},
		{ActionBreakLock, `[1]`},
		{ActionCompact, `{"path":"../x"}`},
	}
	for _, b := range bad {
		if _, err := ParseAction(b.typ, []byte(b.body)); err == nil {
			t.Errorf("ParseAction(%s, %s): no error", b.typ, b.body)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	for in, want := range map[string][]string{"": nil, "/": nil, "sales": {"sales"}, "sales/orders/": {"sales", "orders"}} {
		got, err := ParsePrefix(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParsePrefix(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParsePrefix("a/../b"); err == nil {
		t.Error("ParsePrefix(a/../b): no error")
	}
}

// TestRequestsMustBeUTF8 (red team g08, g09): encoding/json turns invalid
// bytes into U+FFFD, so two different ids, keys or metadata would arrive
// as one: a request that is not valid UTF-8 is refused.
func TestRequestsMustBeUTF8(t *testing.T) {
	for _, b := range [][]byte{
		[]byte("{\"path\":\"a/b\",\"request_id\":\"r\xff\"}"),
		[]byte("{\"path\":\"a/b\",\"metadata\":{\"k\":\"\xc3\"}}"),
	} {
		if _, err := ParseCommand(b); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("ParseCommand(%q): %v, want ErrInvalid naming UTF-8", b, err)
		}
	}
}

// TestJSONErrorsNameFieldsNotGoTypes: a body value of the wrong type is
// answered with its field and the JSON type wanted, never the Go types it
// was to be decoded into (actionWire.seed of type int64).
func TestJSONErrorsNameFieldsNotGoTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"action seed", func() error { _, err := ParseAction(ActionVerify, []byte(`{"seed": "x"}`)); return err }, `field "seed" must be an integer, not string`},
		{"action keep", func() error {
			_, err := ParseAction(ActionRemoveOldVersions, []byte(`{"path": "a", "keep": 1.5}`))
			return err
		}, `field "keep" must be an integer, not number 1.5`},
		{"action path", func() error { _, err := ParseAction(ActionCompact, []byte(`{"path": 3}`)); return err }, `field "path" must be a string, not number`},
		{"action body", func() error { _, err := ParseAction(ActionCompact, []byte(`[1]`)); return err }, `want an object, not array`},
		{"ticket columns", func() error { _, err := ParseTicket([]byte(`{"path": "a", "columns": "x"}`)); return err }, `field "columns" must be an array, not string`},
		{"command mode", func() error { _, err := ParseCommand([]byte(`{"path": "a", "mode": true}`)); return err }, `field "mode" must be a string, not bool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "Wire") {
				t.Errorf("names Go types: %v", err)
			}
		})
	}
}
