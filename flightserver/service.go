package flightserver

import (
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// streamify returns desc with every unary method registered as a stream
// with one request and one response. On the wire a unary call and such a
// stream are the same, so clients see no difference; but grpc-go reads a
// unary request before any interceptor runs, while a stream's request is
// read by the handler, through the interceptors. Registering them as
// streams puts every inbound message of the server behind authentication
// and the in-flight byte budget (see inflight.go), health checks included.
// The names of the converted methods are added to unary.
func streamify(desc grpc.ServiceDesc, unary map[string]bool) *grpc.ServiceDesc {
	out := desc
	out.Methods = nil
	out.Streams = append([]grpc.StreamDesc(nil), desc.Streams...)
	for _, md := range desc.Methods {
		h := md.Handler
		unary["/"+desc.ServiceName+"/"+md.MethodName] = true
		out.Streams = append(out.Streams, grpc.StreamDesc{
			StreamName:    md.MethodName,
			ServerStreams: true,
			Handler: func(srv any, stream grpc.ServerStream) error {
				dec := func(m any) error {
					err := stream.RecvMsg(m)
					if errors.Is(err, io.EOF) {
						return status.Error(codes.InvalidArgument, "the call carried no request message")
					}
					return err
				}
				resp, err := h(srv, stream.Context(), dec, nil)
				if err != nil {
					return err
				}
				return stream.SendMsg(resp)
			},
		})
	}
	return &out
}
