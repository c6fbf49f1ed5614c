package flightserver

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// decodeStream is the stream streamLog hands on: every other interceptor
// and the handler read through it, and it is the one that calls grpc-go's
// RecvMsg. A client's malformed request is INVALID_ARGUMENT here, where
// grpc-go answered it INTERNAL (red team round 24's y02):
//   - a message that does not decode: the codec reports it to this stream
//     (recvBox), not to grpc-go;
//   - a call of a single-request method (one, see singleRequest; streamify
//     registers them as client streams so that grpc-go does not check this
//     itself) with no request or more than one: RecvMsg reads the request
//     and then the end of the client's stream, in one call, as grpc-go did,
//     so the in-flight budget charges it as before;
//   - a message the client's half-close cut off (recvError), for the
//     handler, the log and the metrics only: grpc-go has already answered
//     the client.
type decodeStream struct {
	grpc.ServerStream
	ctx  context.Context
	one  bool // the method takes a single request
	read bool // it was read
}

// Context is the RPC's context, with its rpcInfo.
func (w *decodeStream) Context() context.Context { return w.ctx }

// RecvMsg receives the next message into m. For a single-request method it
// is called once; a second call finds the stream ended (io.EOF).
func (w *decodeStream) RecvMsg(m any) error {
	if !w.one {
		return w.recv(m)
	}
	if w.read {
		return io.EOF
	}
	w.read = true
	err := w.recv(m)
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "the call carried no request message")
	}
	if err != nil {
		return err
	}
	var extra any = &emptypb.Empty{}
	if pm, ok := m.(proto.Message); ok {
		extra = pm.ProtoReflect().New().Interface()
	}
	switch err := w.recv(extra); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	}
	return status.Error(codes.InvalidArgument, "the call carried more than one request message")
}

// recv is one receive of grpc-go's, with the codec's verdict on the
// message.
func (w *decodeStream) recv(m any) error {
	b := &recvBox{m: m}
	if err := w.ServerStream.RecvMsg(b); err != nil {
		return recvError(err)
	}
	return b.err
}

// recvError is err, a receive error of grpc-go's, as the server reports
// it: a message cut off by the client's half-close is the client's
// malformed request, INVALID_ARGUMENT. grpc-go reports it (its parser's
// io.ErrUnexpectedEOF: the stream ended, END_STREAM, before as many bytes
// as the 5-byte prefix promised, or within the prefix) as INTERNAL
// "unexpected EOF", and has already written that status to the client by
// then: serverStream.RecvMsg writes the status of any receive error but
// io.EOF before it returns, so no interceptor can change what the client
// is told. What this changes is what the handler does with it, the log
// line (a warning) and the metrics (so that the alert on Internal does not
// fire for a client's mistake); docs/protocol.md "Errors" says so.
func recvError(err error) error {
	if st, ok := status.FromError(err); ok && st.Code() == codes.Internal && st.Message() == io.ErrUnexpectedEOF.Error() {
		return status.Error(codes.InvalidArgument,
			"the request stream ended in the middle of a message: fewer bytes came than its length prefix promised")
	}
	return err
}
