// Package flightserver is Quiver's Arrow Flight service: it answers the
// RPCs and actions of DESIGN.md §3 over a store, chooses every gRPC status
// code, authenticates and authorizes callers, enforces the limits that keep
// one request from crashing or starving the server, and logs one line per
// RPC.
//
// # Basics
//
//	st, _ := store.Open(dir)
//	srv := flightserver.New(st, flightserver.WithLogger(log))
//	lis, _ := net.Listen("tcp", "localhost:8815")
//	go srv.Serve(lis)
//	defer srv.Stop(ctx) // graceful, then forced when ctx ends
//
// # Security
//
// WithAuth requires bearer tokens or a basic-auth handshake (auth.go),
// checked against roles and key prefixes (authz.go); without it every
// caller is an anonymous admin. WithTLS serves TLS, optionally mutual
// (tls.go). Password checks of handshakes are bounded by PasswordLimits
// and a short login cache (authlimit.go).
//
// # Limits
//
// A panic in an RPC answers codes.Internal and is logged with its stack
// (recover.go). Every inbound message is read through an in-flight byte
// budget after authentication (inflight.go; unary RPCs are registered as
// streams for this, service.go). A put's schema is checked against column
// and depth limits on the message bytes before it is parsed
// (schemalimit.go), and every batch is validated before the store sees it
// (rpc.go). Streams whose client stops sending or reading are cancelled
// (limits.go).
//
// # Caveats
//
// DoPut streams batches to disk as they arrive; a stream that fails or is
// cancelled commits nothing. DoGet slices batches so that each message
// stays under the send limit (4 MiB by default, what a grpc-go client
// receives by default). The package never touches a path on disk and never
// sends one to a client.
package flightserver
