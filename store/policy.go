package store

// The profile's schema policy (docs/format.md, "Schema evolution"): an
// optional contract, kept in <profile>/.quiver.policy.json, that a write of
// a new version may only add nullable columns to the previous version's
// schema, or keep it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/fsys"
)

// policyName is the profile-level file of the schema policy. Hidden, so
// pyrosome (which reads manifest.json and version directories) ignores it
// and no key can name it.
const policyName = ".quiver.policy.json"

// Schema policies.
const (
	// PolicyNone: no contract (a write may bring any schema).
	PolicyNone = "none"
	// PolicyAdditive: a write of a new version may only add nullable
	// columns to the previous version's schema (raising the schema
	// version), or keep it.
	PolicyAdditive = "additive"
)

// SchemaPolicy is the content of a profile's policy file.
type SchemaPolicy struct {
	SchemaPolicy string    `json:"schema_policy"`
	Set          time.Time `json:"set"`
	Writer       string    `json:"writer,omitempty"`
}

// checkPolicyName refuses a policy name other than "", "none" and
// "additive".
func checkPolicyName(p string) error {
	switch p {
	case "", PolicyNone, PolicyAdditive:
		return nil
	}
	return fmt.Errorf("%w: schema_policy %q (want %q or %q)", ErrInvalidArgument, truncateName(p), PolicyAdditive, PolicyNone)
}

func truncateName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// parsePolicy parses a policy file.
func parsePolicy(b []byte) (*SchemaPolicy, error) {
	var sp SchemaPolicy
	if err := json.Unmarshal(b, &sp); err != nil {
		return nil, err
	}
	if sp.SchemaPolicy != PolicyNone && sp.SchemaPolicy != PolicyAdditive {
		return nil, fmt.Errorf("schema_policy %q is not %q or %q", truncateName(sp.SchemaPolicy), PolicyAdditive, PolicyNone)
	}
	return &sp, nil
}

// readPolicy reads a profile's policy file: PolicyNone when it has none.
func (s *Store) readPolicy(ctx context.Context, p profile) (*SchemaPolicy, fsys.Token, error) {
	b, tok, err := s.fs.ReadFile(ctx, p.join(policyName))
	if isNotExist(err) {
		return &SchemaPolicy{SchemaPolicy: PolicyNone}, "", nil
	}
	if notPlainFile(err) {
		// Replaced by a directory, a link or a special file: tampering,
		// reported as corruption (DataLoss), never followed or replaced.
		return nil, "", &CorruptionError{Path: p.join(policyName), Err: fmt.Errorf("%w (a directory, link or special file where the schema policy file belongs; remove it)", err)}
	}
	if err != nil {
		return nil, "", fmt.Errorf("read the schema policy of %s: %w", p, err)
	}
	sp, err := parsePolicy(b)
	if err != nil {
		return nil, "", &CorruptionError{Path: p.join(policyName), Err: err}
	}
	return sp, tok, nil
}

// writePolicy sets the policy file (temp file, renamed over the old one as
// a compare-and-swap on tok). Callers hold the manifest lock.
func (s *Store) writePolicy(ctx context.Context, p profile, policy, writer string, tok fsys.Token) (*SchemaPolicy, error) {
	sp := &SchemaPolicy{SchemaPolicy: policy, Set: s.opts.now().UTC(), Writer: writer}
	b, _ := json.MarshalIndent(sp, "", "  ")
	if err := s.fs.Replace(ctx, p.join(policyName), append(b, '\n'), tok); err != nil {
		return nil, fmt.Errorf("set the schema policy of %s: %w", p, err)
	}
	return sp, nil
}

// Policy returns a profile's schema policy (PolicyNone without one).
func (s *Store) Policy(ctx context.Context, keys []string) (*SchemaPolicy, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	if _, _, err := s.readManifest(ctx, p); err != nil {
		return nil, err
	}
	sp, _, err := s.readPolicy(ctx, p)
	return sp, err
}

// SetPolicy sets a profile's schema policy (an admin's action): "additive"
// or "none"; writer (empty: the store's) is named in the policy file. It holds the manifest lock, so no write commits while it
// changes; data already committed is not checked again.
func (s *Store) SetPolicy(ctx context.Context, keys []string, policy, writer string) (*SchemaPolicy, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	if policy == "" {
		return nil, fmt.Errorf("%w: no schema_policy given (want %q or %q)", ErrInvalidArgument, PolicyAdditive, PolicyNone)
	}
	if err := checkPolicyName(policy); err != nil {
		return nil, err
	}
	if _, _, err := s.readManifest(ctx, p); err != nil {
		return nil, err
	}
	unlock, err := s.lockProfile(ctx, p)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := unlock(); err != nil {
			s.opts.log.Error().Err(err).Str("profile", p.String()).Msg("manifest lock")
		}
	}()
	// Not on a log that is broken or was altered under this process:
	// nothing changes in such a profile (operations.md).
	ps := s.state(p)
	if err := s.syncLog(ctx, ps); err != nil {
		return nil, err
	}
	if err := s.checkLogEnds(ctx, ps); err != nil {
		return nil, err
	}
	cur, tok, err := s.readPolicy(ctx, p)
	if err != nil && !isCorrupt(err) {
		return nil, err
	}
	if err == nil && cur.SchemaPolicy == policy {
		return cur, nil
	}
	if err != nil {
		if notPlainFile(err) {
			return nil, err
		}
		// An unreadable policy file is replaced (verify reported it).
		_, tok, _ = s.fs.ReadFile(ctx, p.join(policyName))
	}
	if writer == "" {
		writer = s.opts.writer
	}
	return s.writePolicy(ctx, p, policy, writer, tok)
}

func isCorrupt(err error) bool {
	var ce *CorruptionError
	return errors.As(err, &ce)
}

// checkPutPolicy refuses a put that names a schema policy other than its
// existing profile's (it is set at the first put, or by SetPolicy).
func (s *Store) checkPutPolicy(ctx context.Context, p profile, o PutOptions) error {
	if err := checkPolicyName(o.SchemaPolicy); err != nil || o.SchemaPolicy == "" {
		return err
	}
	if ok, err := s.exists(ctx, p); err != nil || !ok {
		return err
	}
	sp, _, err := s.readPolicy(ctx, p)
	if err != nil {
		return err
	}
	if sp.SchemaPolicy != o.SchemaPolicy {
		return fmt.Errorf("%w: %s has schema policy %q, not %q: a put sets the policy only when it creates the profile; an admin changes it (the set-schema-policy action, `quiver schema-policy`)",
			ErrInvalidArgument, p, sp.SchemaPolicy, o.SchemaPolicy)
	}
	return nil
}

// checkWritePolicy checks, under the additive policy, a write of a new
// version with schema sc and schema version sv against the previous
// version's current schema prev and schema version pv: it may keep the
// columns (types widened losslessly at most) or add nullable ones under a
// higher schema version. castTypes is false for CSV (types inferred).
func checkWritePolicy(what string, prev *arrow.Schema, pv string, sc *arrow.Schema, sv string, castTypes bool) error {
	rule := "the profile's schema policy is additive: a new version may only keep the previous version's columns or add nullable ones (raising schema_version)"
	fix := "send the same columns (plus nullable new ones), or have an admin change the policy (the set-schema-policy action, `quiver schema-policy`)"
	var missing, extra, bad []string
	for _, f := range prev.Fields() {
		idx := sc.FieldIndices(f.Name)
		if len(idx) == 0 {
			missing = append(missing, f.Name)
			continue
		}
		if t := sc.Field(idx[0]).Type; castTypes && !arrow.TypeEqual(t, f.Type) && !codec.SameLayout(f.Type, t) && !codec.LosslessWidening(f.Type, t) {
			bad = append(bad, fmt.Sprintf("%q is %s, was %s", f.Name, t, f.Type))
		}
	}
	var notNull []string
	for _, f := range sc.Fields() {
		if len(prev.FieldIndices(f.Name)) == 0 {
			extra = append(extra, f.Name)
			if !f.Nullable {
				notNull = append(notNull, f.Name)
			}
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Errorf("%w: %s: columns %s of the previous version are missing: %s; %s", ErrSchemaMismatch, what, codec.QuoteNames(missing), rule, fix)
	case len(bad) > 0:
		return fmt.Errorf("%w: %s: %s: %s; %s", ErrSchemaMismatch, what, strings.Join(bad, "; "), rule, fix)
	case len(notNull) > 0:
		return fmt.Errorf("%w: %s: new columns %s are non-nullable: %s; declare them nullable", ErrSchemaMismatch, what, codec.QuoteNames(notNull), rule)
	}
	if pv == "" || sv == pv {
		if len(extra) > 0 && (sv == "" || sv == pv) {
			return fmt.Errorf("%w: %s: the write adds columns %s under schema_version %q, the previous version's: %s; send schema_version above %q (e.g. %q)",
				ErrSchemaMismatch, what, codec.QuoteNames(extra), sv, rule, pv, suggestNext(pv))
		}
		return nil
	}
	if sv == "" {
		return fmt.Errorf("%w: %s: the write has no schema_version, the previous version has %q: %s; send %q or a higher one", ErrSchemaMismatch, what, pv, rule, pv)
	}
	cv, okc := parseSemVer(pv)
	nv, okn := parseSemVer(sv)
	switch {
	case !okc:
		if len(extra) > 0 {
			return fmt.Errorf("%w: %s: the previous version's schema version %q is not a semantic version, so no higher one can be told: %s", ErrSchemaMismatch, what, pv, rule)
		}
		return fmt.Errorf("%w: %s: schema_version %q differs from the previous version's %q, which is not a semantic version: %s; keep %q", ErrSchemaMismatch, what, sv, pv, rule, pv)
	case !okn:
		return fmt.Errorf("%w: %s: schema_version %q is not a semantic version (MAJOR.MINOR.PATCH): %s", ErrSchemaMismatch, what, sv, rule)
	case compareSemVer(nv, cv) < 0 || (len(extra) > 0 && compareSemVer(nv, cv) == 0):
		return fmt.Errorf("%w: %s: schema_version %q is not above the previous version's %q: %s (e.g. %q)", ErrSchemaMismatch, what, sv, pv, rule, suggestNext(pv))
	}
	return nil
}

// previousSchema is version v's current schema and schema version, for
// the policy check of the write that follows it.
func (s *Store) previousSchema(ctx context.Context, ps *profileState, v int, recs []*CommitRecord) (*arrow.Schema, string, Format, error) {
	if sc, sv, ok, err := s.currentOf(ctx, ps, v, recs); err != nil || ok {
		return sc, sv, FormatParquet, err
	}
	vs, err := s.loadVersion(ctx, ps, v, v, loadRead)
	if err != nil {
		return nil, "", "", err
	}
	return vs.Schema, vs.SchemaVersion, vs.Format, nil
}

// policyCheckWrite applies the additive policy to a write staged as st,
// whose previous version is prev (-1: none). It is called when the write
// is staged and again in its commit cycle (holding the lock), against the
// version that is latest then.
func (s *Store) policyCheckWrite(ctx context.Context, ps *profileState, st *staged, prev int, recs []*CommitRecord) error {
	if st.mode != ModeWrite || prev < 0 || st.o.carry != nil {
		return nil
	}
	return s.policyCheck(ctx, ps, st.schema, st.schemaV, st.format, prev, recs, fmt.Sprintf("%s %s (after %s)", ps.p, VersionName(st.version), VersionName(prev)))
}

// policyCheck checks a new version of schema sc, schema version sv and
// format f against version prev under the profile's policy.
func (s *Store) policyCheck(ctx context.Context, ps *profileState, sc *arrow.Schema, sv string, f Format, prev int, recs []*CommitRecord, what string) error {
	sp, _, err := s.readPolicy(ctx, ps.p)
	if err != nil || sp.SchemaPolicy != PolicyAdditive {
		return err
	}
	psc, pv, pf, err := s.previousSchema(ctx, ps, prev, recs)
	if err != nil {
		if errors.Is(err, ErrVersionNotFound) {
			return nil
		}
		return err
	}
	return checkWritePolicy(what, psc, pv, sc, sv, pf == FormatParquet && f == FormatParquet)
}

// createPolicy writes the policy of a put that creates its profile, in its
// commit cycle (holding the lock), before its record: a profile never
// exists without the contract its creator asked for. A policy file left by
// a creation that did not commit is replaced.
func (s *Store) createPolicy(ctx context.Context, p profile, st *staged) error {
	if st.o.SchemaPolicy == "" || st.o.SchemaPolicy == PolicyNone {
		return nil
	}
	_, tok, err := s.fs.ReadFile(ctx, p.join(policyName))
	if err != nil && !isNotExist(err) {
		return fmt.Errorf("set the schema policy of %s: %w", p, err)
	}
	_, err = s.writePolicy(ctx, p, st.o.SchemaPolicy, s.writerOf(st.o), tok)
	return err
}

// policyKnown reports whether a profile-level name is the policy file.
func policyKnown(name string) bool { return name == policyName }
