package flightserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// DoAction runs an admin action (DESIGN.md §3.1). Every action answers one
// Result with a JSON object, except lineage, which answers one Result per
// commit record, oldest first. The objects are catalog's wire types, built
// from the store's results by catalog's …From functions.
func (s *Server) DoAction(action *flight.Action, stream flight.FlightService_DoActionServer) error {
	ctx := stream.Context()
	ri := info(ctx)
	ri.action.Store(action.GetType())
	a, err := catalog.ParseAction(action.GetType(), action.GetBody())
	if err != nil {
		return fail(ctx, err)
	}
	ri.profile.Store(a.Path())
	if a.Type != catalog.ActionVerify || len(a.Keys) > 0 {
		var keys []string // sweep acts on the whole data dir
		if a.Type != catalog.ActionSweep {
			keys = a.Keys
		}
		if err := s.allow(ctx, a.Type, keys); err != nil {
			return err
		}
	}
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fail(ctx, fmt.Errorf("encode %s result: %w", a.Type, err))
		}
		ri.bytes.Add(int64(len(b)))
		if err := stream.Send(&flight.Result{Body: b}); err != nil {
			return fail(ctx, fmt.Errorf("send %s result: %w", a.Type, err))
		}
		return nil
	}
	switch a.Type {
	case catalog.ActionListVersions:
		latest, vs, err := s.st.Versions(ctx, a.Keys)
		if err != nil {
			return fail(ctx, err)
		}
		res := catalog.ListVersionsResultFrom(a.Keys, latest, vs)
		if res.Versions == nil {
			res.Versions = []catalog.VersionSummary{}
		}
		if sp, err := s.st.Policy(ctx, a.Keys); err == nil && sp.SchemaPolicy != store.PolicyNone {
			res.SchemaPolicy = sp.SchemaPolicy
		}
		return send(res)
	case catalog.ActionVerify:
		rep, err := s.verify(ctx, a)
		if err != nil {
			return err
		}
		s.metrics.verify(rep)
		ri.rows.Store(int64(rep.CheckedFiles))
		return send(catalog.VerifyResultFrom(rep))
	case catalog.ActionLineage:
		var sendErr error
		err := s.st.Lineage(ctx, a.Keys, func(cr *store.CommitRecord) error {
			ri.rows.Add(1)
			if line := cr.Line(); line != nil {
				// The record exactly as stored: its hash and signature
				// can be checked from the result alone.
				sendErr = send(json.RawMessage(line))
			} else {
				sendErr = send(catalog.PutResultFrom(cr))
			}
			return sendErr
		})
		if sendErr != nil {
			// Already a status, its cause recorded by send (recording a
			// second cause of another type would panic the atomic.Value).
			// A client that stops reading ends here.
			return sendErr
		}
		if err != nil {
			return fail(ctx, err)
		}
		return nil
	case catalog.ActionRemoveOldVersions:
		grace := s.opts.grace
		if a.Grace != nil {
			grace = *a.Grace
		}
		rep, err := maint.RemoveOldVersions(ctx, s.st, a.Keys, a.Keep, grace, identityName(ctx))
		if err != nil {
			return s.failed(ctx, err)
		}
		if rep.Removed == nil {
			rep.Removed = []string{}
		}
		s.opts.log.Info().Str("identity", IdentityFrom(ctx).Name).Str("profile", a.Path()).Strs("removed", rep.Removed).Msg("remove-old-versions")
		return send(catalog.RemoveOldVersionsResultFrom(rep))
	case catalog.ActionSweep:
		age := s.opts.sweepAge
		if a.OlderThan != nil {
			age = *a.OlderThan
		}
		rep, err := maint.Sweep(ctx, s.st, age)
		if err != nil {
			return fail(ctx, err)
		}
		if rep.Removed == nil {
			rep.Removed = []string{}
		}
		s.opts.log.Info().Str("identity", IdentityFrom(ctx).Name).Int("removed", len(rep.Removed)).Msg("sweep")
		return send(catalog.SweepResultFrom(rep))
	case catalog.ActionBreakLock:
		res, err := s.st.BreakLock(ctx, a.Keys)
		if err != nil {
			return fail(ctx, err)
		}
		s.opts.log.Warn().Str("identity", IdentityFrom(ctx).Name).Str("profile", a.Path()).Bool("broken", res.Broken).Str("reason", res.Reason).Msg("break-lock")
		return send(catalog.BreakLockResultFrom(res))
	case catalog.ActionSetSchemaPolicy:
		sp, err := s.st.SetPolicy(ctx, a.Keys, a.SchemaPolicy, identityName(ctx))
		if err != nil {
			return fail(ctx, err)
		}
		s.opts.log.Info().Str("identity", IdentityFrom(ctx).Name).Str("profile", a.Path()).Str("schema_policy", sp.SchemaPolicy).Msg("set-schema-policy")
		return send(catalog.SchemaPolicyResultFrom(a.Keys, sp))
	case catalog.ActionCompact:
		var writer string // who asked for it goes into the commit record
		if id := IdentityFrom(ctx); id != nil {
			writer = id.Name
		}
		cr, err := s.st.Compact(ctx, a.Keys, store.CompactOptions{Writer: writer})
		if err != nil {
			return s.failed(ctx, err)
		}
		s.metrics.commit("compact")
		ri.rows.Store(cr.Rows)
		return send(catalog.PutResultFrom(cr))
	}
	return fail(ctx, fmt.Errorf("%w: %q", catalog.ErrUnknownAction, a.Type))
}

// verify runs the verify action over what the caller may read: one
// profile (checked by allow), or a key prefix narrowed to the caller's own
// prefixes (verify {} by a prefix-limited identity checks exactly its
// prefixes). A prefix wholly outside them is PermissionDenied.
func (s *Server) verify(ctx context.Context, a *catalog.Action) (*maint.VerifyReport, error) {
	if len(a.Keys) > 0 {
		rep, err := maint.Verify(ctx, s.st, maint.VerifyOptions{Keys: a.Keys, Sample: a.Sample, Seed: a.Seed, PublicKey: a.PublicKey})
		if err != nil {
			return nil, fail(ctx, err)
		}
		return rep, nil
	}
	id := IdentityFrom(ctx)
	if id == nil || id.Role < RoleRead {
		return nil, s.allow(ctx, catalog.ActionVerify, a.Prefix)
	}
	targets := id.Within(a.Prefix)
	if len(targets) == 0 {
		return nil, s.deny(ctx, id, catalog.ActionVerify, store.ProfilePath(a.Prefix), "prefix is outside the identity's key prefixes")
	}
	var all *maint.VerifyReport
	for _, p := range targets {
		rep, err := maint.Verify(ctx, s.st, maint.VerifyOptions{Prefix: p, Sample: a.Sample, Seed: a.Seed, PublicKey: a.PublicKey})
		if err != nil {
			return nil, fail(ctx, err)
		}
		if all == nil {
			all = rep
			continue
		}
		all.OK = all.OK && rep.OK
		all.CheckedFiles += rep.CheckedFiles
		all.Problems = append(all.Problems, rep.Problems...)
		all.Heads = append(all.Heads, rep.Heads...)
	}
	return all, nil
}

// identityName is who made the request, for commit records ("" when
// anonymous: the store's own writer identity is used).
func identityName(ctx context.Context) string {
	if id := IdentityFrom(ctx); id != nil {
		return id.Name
	}
	return ""
}
