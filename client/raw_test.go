package client_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/flightserver"
)

// TestPutRawAndReadTicket: PutRaw answers the result's bytes as sent;
// ReadTicket reads each form of ticket the server takes.
func TestPutRawAndReadTicket(t *testing.T) {
	s := startServer(t)
	c := connect(t, s.addr)
	ctx := ctxT(t)
	raw, err := c.PutRaw(ctx, "a/b", reader(t, batch(0, 4)), client.PutOptions{RequestID: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	var pr catalog.PutResult
	if err := json.Unmarshal(raw, &pr); err != nil || pr.Path != "a/b" || pr.Rows != 4 || pr.RequestID != "job-1" {
		t.Fatalf("PutRaw: %s (%v)", raw, err)
	}
	// Put of the same request id answers the same result.
	again, err := c.Put(ctx, "a/b", reader(t, batch(0, 4)), client.PutOptions{RequestID: "job-1"})
	if err != nil || again.Version != pr.Version || again.Index != pr.Index {
		t.Fatalf("Put after PutRaw: %+v (%v), first %s", again, err, raw)
	}
	plan, err := c.Plan(ctx, client.ReadRequest{Path: "a/b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ticket string
		want         []int64
	}{
		{"bare path", "a/b", seq(0, 4)},
		{"JSON command", `{"path":"a/b","columns":["id"],"limit":2}`, seq(0, 2)},
		{"endpoint", string(plan.Endpoints[0].GetTicket().GetTicket()), seq(0, 4)},
	} {
		rdr, err := c.ReadTicket(ctx, []byte(tc.ticket))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ids(t, rdr); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ids %v, want %v", tc.name, got, tc.want)
		}
	}
}

// twoResults makes every DoPut answer its PutResult twice.
func twoResults(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if !strings.HasSuffix(info.FullMethod, "/DoPut") {
		return h(srv, ss)
	}
	return h(srv, &twiceStream{ss})
}

type twiceStream struct{ grpc.ServerStream }

func (w *twiceStream) SendMsg(m any) error {
	if err := w.ServerStream.SendMsg(m); err != nil {
		return err
	}
	if _, ok := m.(*flight.PutResult); ok {
		return w.ServerStream.SendMsg(m)
	}
	return nil
}

// TestPutRefusesSeveralResults: a put answered by more than one result is
// ErrUnexpectedResult, from Put and PutRaw alike.
func TestPutRefusesSeveralResults(t *testing.T) {
	s := startServer(t, flightserver.WithGRPCOptions(grpc.ChainStreamInterceptor(twoResults)))
	c := connect(t, s.addr)
	if _, err := c.Put(ctxT(t), "a/b", reader(t, batch(0, 1)), client.PutOptions{}); !errors.Is(err, client.ErrUnexpectedResult) {
		t.Fatalf("Put: %v, want ErrUnexpectedResult", err)
	}
	if _, err := c.PutRaw(ctxT(t), "a/c", reader(t, batch(0, 1)), client.PutOptions{}); !errors.Is(err, client.ErrUnexpectedResult) {
		t.Fatalf("PutRaw: %v, want ErrUnexpectedResult", err)
	}
}
