package flightserver

import (
	flightgen "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// streamify returns desc with every unary method registered as a stream
// with one request and one response. On the wire a unary call and such a
// stream are the same, so clients see no difference; but grpc-go reads a
// unary request before any interceptor runs, while a stream's request is
// read by the handler, through the interceptors. Registering them as
// streams puts every inbound message of the server behind authentication
// and the in-flight byte budget (see inflight.go), health checks included.
// The names of the converted methods are added to unary.
//
// Every method whose client sends one request (the unary ones and the
// server streams: DoGet, DoAction, ListFlights, ListActions) is registered
// as a client stream too, and decodeStream reads its one request: grpc-go
// checks the one request of a method registered without client streaming
// itself, and answers a call with none or two INTERNAL "cardinality
// violation" on its own, before the handler can refuse it (red team round
// 24's y02).
func streamify(desc grpc.ServiceDesc, unary map[string]bool) *grpc.ServiceDesc {
	out := desc
	out.Methods = nil
	out.Streams = nil
	for _, sd := range desc.Streams {
		sd.ClientStreams = true
		out.Streams = append(out.Streams, sd)
	}
	for _, md := range desc.Methods {
		h := md.Handler
		unary["/"+desc.ServiceName+"/"+md.MethodName] = true
		out.Streams = append(out.Streams, grpc.StreamDesc{
			StreamName:    md.MethodName,
			ServerStreams: true,
			ClientStreams: true,
			Handler: func(srv any, stream grpc.ServerStream) error {
				resp, err := h(srv, stream.Context(), stream.RecvMsg, nil)
				if err != nil {
					return err
				}
				return stream.SendMsg(resp)
			},
		})
	}
	return &out
}

// singleRequest holds the full names of the Flight methods whose client
// sends exactly one request: the unary ones and the server streams, which
// streamify registers as client streams.
var singleRequest = func() map[string]bool {
	d := flightgen.FlightService_ServiceDesc
	m := map[string]bool{}
	for _, md := range d.Methods {
		m["/"+d.ServiceName+"/"+md.MethodName] = true
	}
	for _, sd := range d.Streams {
		if !sd.ClientStreams {
			m["/"+d.ServiceName+"/"+sd.StreamName] = true
		}
	}
	return m
}()

// healthService registers the standard health service so that it never
// reads its request: health checks need no credentials, so a request they
// read would be memory any client could make the server spend (up to the
// receive message limit each). Every service of this server has the same
// status, so the answer for "" (the whole server) is the answer for any of
// them. Check and List are registered as streams, like streamify does.
func healthService(h *health.Server) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: healthpb.Health_ServiceDesc.ServiceName,
		HandlerType: (*healthpb.HealthServer)(nil),
		Streams: []grpc.StreamDesc{
			{StreamName: "Check", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				resp, err := h.Check(st.Context(), &healthpb.HealthCheckRequest{})
				if err != nil {
					return err
				}
				return st.SendMsg(resp)
			}},
			{StreamName: "List", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				resp, err := h.List(st.Context(), &healthpb.HealthListRequest{})
				if err != nil {
					return err
				}
				return st.SendMsg(resp)
			}},
			{StreamName: "Watch", ServerStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
				return h.Watch(&healthpb.HealthCheckRequest{}, &healthWatch{st})
			}},
		},
		Metadata: healthpb.Health_ServiceDesc.Metadata,
	}
}

// healthWatch is the stream of a Watch.
type healthWatch struct{ grpc.ServerStream }

func (w *healthWatch) Send(r *healthpb.HealthCheckResponse) error { return w.SendMsg(r) }
