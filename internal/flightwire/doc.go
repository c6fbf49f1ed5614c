// Package flightwire encodes and decodes Arrow Flight's protobuf messages
// for gRPC with fewer copies and less zeroed memory than grpc-go's proto
// codec: the Flight server's codec and the Go client's build on it.
package flightwire
