package flightserver

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store"
)

// Required is the role each RPC and action needs (docs/security.md). An
// operation missing here needs no role beyond being authenticated
// (ListActions, Handshake).
var Required = map[string]Role{
	"DoGet":                         RoleRead,
	"GetFlightInfo":                 RoleRead,
	"GetSchema":                     RoleRead,
	"ListFlights":                   RoleRead,
	catalog.ActionListVersions:      RoleRead,
	catalog.ActionLineage:           RoleRead,
	catalog.ActionVerify:            RoleRead,
	"DoPut":                         RoleWrite,
	catalog.ActionRemoveOldVersions: RoleAdmin,
	catalog.ActionSweep:             RoleAdmin,
	catalog.ActionBreakLock:         RoleAdmin,
	catalog.ActionCompact:           RoleAdmin,
	catalog.ActionSetSchemaPolicy:   RoleAdmin,
}

// allow checks that the RPC's identity may do op on the profile keys
// (nil: an operation on the whole data dir, which needs an identity not
// limited to prefixes). A denial is PermissionDenied and is logged with
// the identity.
func (s *Server) allow(ctx context.Context, op string, keys []string) error {
	id := IdentityFrom(ctx)
	if id == nil {
		// Every RPC passes the auth interceptor; this guards the contract.
		return status.Error(codes.Unauthenticated, "no identity")
	}
	need := Required[op]
	var why string
	switch {
	case id.Role < need:
		why = "needs role " + need.String()
	case keys == nil && !id.Unrestricted():
		why = "acts on the whole data dir and the identity is limited to key prefixes"
	case keys != nil && !id.Covers(keys):
		why = "profile is outside the identity's key prefixes"
	default:
		return nil
	}
	return s.deny(ctx, id, op, store.ProfilePath(keys), why)
}

func (s *Server) deny(ctx context.Context, id *Identity, op, profile, why string) error {
	s.metrics.denied(op)
	ev := s.opts.log.Warn().Str("identity", id.Name).Str("role", id.Role.String()).Str("op", op).Str("peer", peerHost(ctx))
	if profile != "" {
		ev = ev.Str("profile", profile)
	}
	ev.Str("reason", why).Msg("permission denied")
	msg := id.Name + " may not " + op
	if profile != "" {
		msg += " " + profile
	}
	return status.Error(codes.PermissionDenied, msg+": "+why)
}

// isHealth reports whether method belongs to the gRPC health service,
// which answers without credentials (load balancers and orchestrators
// have none).
func isHealth(method string) bool { return strings.HasPrefix(method, "/grpc.health.v1.Health/") }

func isHandshake(method string) bool { return strings.HasSuffix(method, "/Handshake") }

func (s *Server) unaryAuth(ctx context.Context, req any, si *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if isHealth(si.FullMethod) {
		return h(ctx, req)
	}
	id, err := s.authenticate(ctx)
	if err != nil {
		return nil, s.unauthenticated(ctx, err)
	}
	info(ctx).identity.Store(id.Name)
	return h(context.WithValue(ctx, identityKey{}, id), req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, si *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx := ss.Context()
	if isHealth(si.FullMethod) {
		return h(srv, ss)
	}
	var id *Identity
	var err error
	if isHandshake(si.FullMethod) {
		id, err = s.handshake(ctx, func(md metadata.MD) error { return ss.SetHeader(md) })
	} else {
		id, err = s.authenticate(ctx)
	}
	if err != nil {
		return s.unauthenticated(ctx, err)
	}
	info(ctx).identity.Store(id.Name)
	return h(srv, &wrappedStream{ServerStream: ss, ctx: context.WithValue(ctx, identityKey{}, id)})
}

func (s *Server) unauthenticated(ctx context.Context, err error) error {
	s.metrics.unauthenticated()
	return err
}

// Handshake completes the basic-auth handshake; the auth interceptor has
// already checked the credentials and set the token header. It reads what
// the client sends until it closes its side and answers nothing more.
func (s *Server) Handshake(stream flight.FlightService_HandshakeServer) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return nil //nolint:nilerr // EOF or a client gone: the handshake is over either way
		}
	}
}

// readable narrows a key prefix (nil: everything) to the prefixes the
// RPC's identity may read; none when it may read nothing under it.
func readable(ctx context.Context, prefix []string) [][]string {
	id := IdentityFrom(ctx)
	if id == nil || id.Role < RoleRead {
		return nil
	}
	return id.Within(prefix)
}
