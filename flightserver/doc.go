// Package flightserver is Quiver's Arrow Flight service: it answers the
// RPCs and actions of DESIGN.md §3 over a store, chooses every gRPC status
// code, enforces message-size limits and logs one line per RPC.
//
// # Basics
//
//	st, _ := store.Open(dir)
//	srv := flightserver.New(st, flightserver.WithLogger(log))
//	lis, _ := net.Listen("tcp", "localhost:8815")
//	go srv.Serve(lis)
//	defer srv.Stop(ctx) // graceful, then forced when ctx ends
//
// # Caveats
//
// DoPut streams batches to disk as they arrive; a stream that fails or is
// cancelled commits nothing. DoGet slices batches so that each message
// stays under the send limit (4 MiB by default, what a grpc-go client
// receives by default). Authentication and TLS are not implemented yet.
// The package never touches a path on disk and never sends one to a
// client.
package flightserver
