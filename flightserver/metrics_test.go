package flightserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
)

// doAction runs one action and drains its results; it returns the status
// code.
func doAction(t *testing.T, c flight.Client, typ string, body []byte) codes.Code {
	t.Helper()
	st, err := c.DoAction(context.Background(), &flight.Action{Type: typ, Body: body})
	if err != nil {
		return status.Code(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			if err == io.EOF {
				return codes.OK
			}
			return status.Code(err)
		}
	}
}

// TestActionLabelsBounded: every distinct action type a client sends that
// the server has no action for is counted under the one label "unknown",
// so the series of quiver_actions_total stay bounded however many
// distinct types arrive (each used to keep a series, and the string, for
// the life of the process). Known types keep their own label, and the log
// line keeps only the start of a long type.
func TestActionLabelsBounded(t *testing.T) {
	var logs bytes.Buffer
	ts := startSrv(t, true, WithLogger(zerolog.New(&logs)))
	long := strings.Repeat("A", 64<<10)
	for i := range 200 {
		if code := doAction(t, ts.c, fmt.Sprintf("%06d%s", i, long), []byte("{}")); code != codes.Unimplemented {
			t.Fatalf("bogus action %d: %v, want Unimplemented", i, code)
		}
	}
	if code := doAction(t, ts.c, catalog.ActionListVersions, []byte(`{}`)); code != codes.InvalidArgument {
		t.Fatalf("list-versions without a path: %v, want InvalidArgument", code)
	}
	m := ts.srv.metrics
	if n := seriesCount(m.actions); n != 2 {
		t.Errorf("quiver_actions_total has %d series, want 2 (unknown and list-versions)", n)
	}
	if n := metricValue(t, m.actions.WithLabelValues(unknownLabel, codes.Unimplemented.String())); n != 200 {
		t.Errorf("unknown actions counted %v, want 200", n)
	}
	if n := metricValue(t, m.actions.WithLabelValues(catalog.ActionListVersions, codes.InvalidArgument.String())); n != 1 {
		t.Errorf("list-versions counted %v, want 1", n)
	}
	if strings.Contains(logs.String(), long[:maxLoggedAction+1]) {
		t.Error("the log kept a whole client-sent action type")
	}
	if logs.Len() > 200*(8<<10) {
		t.Errorf("the log grew by %d bytes for 200 refused actions", logs.Len())
	}
}

// TestMethodLabelsBounded: labels keyed by method or operation names stay
// in the fixed set (the Flight and health methods, the action types), any
// other name becoming "unknown".
func TestMethodLabelsBounded(t *testing.T) {
	tests := []struct{ in, want string }{
		{"DoPut", "DoPut"},
		{"Handshake", "Handshake"},
		{"Check", "Check"},
		{"NoSuchMethod", unknownLabel},
		{strings.Repeat("x", 1000), unknownLabel},
		{"", unknownLabel},
	}
	for _, tt := range tests {
		if got := methodLabel(tt.in); got != tt.want {
			t.Errorf("methodLabel(%.20q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	m := newMetrics()
	for i := range 100 {
		name := fmt.Sprintf("bogus-%d", i)
		m.rpc(name, codes.OK, 0, name, &rpcInfo{})
		m.denied(name)
		m.panic(name)
		m.streamOpen(name)()
	}
	m.denied(catalog.ActionSweep)
	m.denied("DoGet")
	for name, c := range map[string]int{
		"rpcs": seriesCount(m.rpcs), "actions": seriesCount(m.actions),
		"panics": seriesCount(m.panics), "streams": seriesCount(m.streams),
	} {
		if c != 1 {
			t.Errorf("%s has %d series after 100 unknown names, want 1", name, c)
		}
	}
	if n := seriesCount(m.denials); n != 3 {
		t.Errorf("denials has %d series, want 3 (unknown, sweep, DoGet)", n)
	}
}

// seriesCount is how many series c has.
func seriesCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}
