package catalog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/store"
)

// isRequestError reports whether err is one of the errors a bad request may
// produce (anything else would be a server fault).
func isRequestError(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, store.ErrInvalidKey) || errors.Is(err, store.ErrInvalidArgument) ||
		errors.Is(err, ErrUnknownAction)
}

// FuzzParseTicket: any bytes either parse to a request with valid keys that
// survives an encode/parse round trip, or fail with a request error.
func FuzzParseTicket(f *testing.F) {
	f.Add([]byte(`sales/orders`))
	f.Add([]byte(`{"path":"sales/orders","version":3,"partition":{"region":"eu"},"columns":["id"]}`))
	f.Add([]byte(`{"path":"sales/orders","filter":{"and":[{"col":"region","op":"=","value":"eu"},{"col":"total","op":">","value":100}]},"limit":10}`))
	f.Add([]byte(`{"prefix":"sales","source_column":"profile","limit":3}`))
	f.Add([]byte(`{"path":"a/b","version":0,"files":["v0/0.csv"],"csv_types":{"id":"int64","f":"float64","b":"bool","s":"string"}}`))
	f.Add([]byte(`{"path":"a/b","files":["v0/0.csv"],"csv_types":{"":"string","a\"b":"int64"}}`))
	f.Add([]byte(`{"path":"a/b","files":["v0/0.csv"],"csv_types":{"x":"int64","x":"utf8"}}`))
	f.Add([]byte(`{"paths":["a/b","a/c"],"versions":[1,"latest"],"read":1,"files":["v1/0.parquet"]}`))
	f.Add([]byte(`{"path":"a/b","filter":{"substrait":"Gh8KGkIYCggSBgoCEgAiABIFCgNiAWESBQoDYgFiGgF4ImcKBnJlZ2lvbgoFdG90YWwKAWQKAnRzCgFzCgFhCgFmCgNiaWcKBGZsYWcSOwoEYgIQAQoEKgIQAQoFggECEAEKB4oCBAgGGAEKC8oBCAoEOgIQARgBCgRaAhABCgQ6AhABCgQKAhABOhAQLCoMQWNlcm8gMjYuMC4x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseTicket(b)
		if err != nil {
			if !isRequestError(err) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if r.Multi != nil {
			if r.Keys != nil || (r.Multi.Prefix == nil) == (r.Multi.Profiles == nil) {
				t.Fatalf("a multi-profile read with keys %q, prefix %q, profiles %q", r.Keys, r.Multi.Prefix, r.Multi.Profiles)
			}
			for _, k := range r.Multi.Profiles {
				if err := store.ValidateKeys(k); err != nil {
					t.Fatalf("parsed invalid keys %q: %v", k, err)
				}
			}
		} else if err := store.ValidateKeys(r.Keys); err != nil {
			t.Fatalf("parsed invalid keys %q: %v", r.Keys, err)
		}
		again, err := ParseTicket(EncodeTicket(r))
		if err != nil {
			t.Fatalf("re-parse of %s: %v", EncodeTicket(r), err)
		}
		// A filter comes back in the JSON form (a Substrait one too):
		// the same filter, perhaps with literals of another kind.
		if (again.Filter == nil) != (r.Filter == nil) || r.Filter != nil && again.Filter.String() != r.Filter.String() {
			t.Fatalf("filter round trip: %v != %v", again.Filter, r.Filter)
		}
		again.Filter, r.Filter = nil, nil
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip: %+v != %+v", again, r)
		}
	})
}

// FuzzParseDescriptor: CMD bytes and PATH components either parse to valid
// keys or fail with a request error; they never panic.
func FuzzParseDescriptor(f *testing.F) {
	f.Add([]byte(`{"path":"sales/orders","mode":"write","partition_by":["region"],"metadata":{"run":1},"request_id":"x"}`), "sales", "orders")
	f.Add([]byte(`sales/orders`), "a/b", "")
	f.Fuzz(func(t *testing.T, cmd []byte, p1, p2 string) {
		for _, d := range []*flight.FlightDescriptor{
			{Type: flight.DescriptorCMD, Cmd: cmd},
			{Type: flight.DescriptorPATH, Path: []string{p1, p2}},
			{Type: flight.DescriptorPATH, Path: []string{p1}},
		} {
			r, err := ParseDescriptor(d)
			if err != nil {
				if !isRequestError(err) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				continue
			}
			if err := store.ValidateKeys(r.Keys); err != nil {
				t.Fatalf("parsed invalid keys %q: %v", r.Keys, err)
			}
			if r.Mode != store.ModeAppend && r.Mode != store.ModeWrite && d.Type == flight.DescriptorCMD {
				t.Fatalf("mode %q", r.Mode)
			}
		}
	})
}

// FuzzParseAction: action bodies never panic, and an accepted body names
// valid keys and sane durations.
func FuzzParseAction(f *testing.F) {
	f.Add(ActionRemoveOldVersions, []byte(`{"path":"a/b","keep":2,"grace_s":60}`))
	f.Add(ActionVerify, []byte(`{"prefix":"sales"}`))
	f.Add(ActionSweep, []byte(`{"older_than_s":3600}`))
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		a, err := ParseAction(typ, body)
		if err != nil {
			if !isRequestError(err) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if a.Keys != nil {
			if err := store.ValidateKeys(a.Keys); err != nil {
				t.Fatalf("invalid keys %q: %v", a.Keys, err)
			}
		}
		if (a.Grace != nil && *a.Grace < 0) || (a.OlderThan != nil && *a.OlderThan < 0) {
			t.Fatalf("negative duration: %+v", a)
		}
		if a.Type == ActionRemoveOldVersions && a.Keep < 1 {
			t.Fatalf("keep %d", a.Keep)
		}
	})
}
