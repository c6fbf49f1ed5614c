package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/maint"
)

// versionsResult is the body of list-versions (DESIGN.md §3.1).
type versionsResult struct {
	Path     string                 `json:"path"`
	Latest   string                 `json:"latest"`
	Versions []store.VersionSummary `json:"versions"`
}

// verifyRequest is what `quiver verify` asks for.
type verifyRequest struct {
	prefix string
	sample float64
	seed   int64
}

// admin is what the admin subcommands need, from a server (Flight actions)
// or straight from a data dir (the store) when the server is down. Every
// method answers the JSON bodies of DESIGN.md §3.1, so both print alike.
type admin interface {
	// Profiles lists the profiles under a key prefix ("" for all).
	Profiles(ctx context.Context, prefix string) ([]string, error)
	Versions(ctx context.Context, profile string) (*versionsResult, error)
	Schema(ctx context.Context, profile, version string) (*arrow.Schema, error)
	// Lineage writes the commit records as NDJSON, oldest first.
	Lineage(ctx context.Context, profile string, w io.Writer) error
	Verify(ctx context.Context, r verifyRequest) (*maint.VerifyReport, error)
	// GC removes old versions; grace nil means the default.
	GC(ctx context.Context, profile string, keep int, grace *time.Duration) (*maint.RetentionReport, error)
	Compact(ctx context.Context, profile string) (*store.CommitRecord, error)
	// Sweep removes stale temps; olderThan nil means the default.
	Sweep(ctx context.Context, olderThan *time.Duration) (*maint.SweepReport, error)
	BreakLock(ctx context.Context, profile string) (*store.BreakLockResult, error)
	Close() error
}

// offline runs admin subcommands directly on a data dir.
type offline struct {
	st *store.Store
}

// openOffline opens an existing data dir; unlike `serve` it never creates
// one, so a mistyped --data-dir is an error and not an empty store.
func openOffline(dir string, stderr io.Writer) (*offline, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data dir %s does not exist", dir)
		}
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data dir %s is not a directory", dir)
	}
	// Warnings (a broken lock, for one) go to the operator's terminal.
	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: !colorOK(stderr), TimeFormat: time.RFC3339}).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()
	st, err := store.Open(dir, store.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return &offline{st: st}, nil
}

func keysOf(profile string) ([]string, error) { return store.ParseKeys(profile) }

func (o *offline) Profiles(ctx context.Context, prefix string) ([]string, error) {
	keys, err := catalog.ParsePrefix(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	err = o.st.ListProfiles(ctx, keys, func(ps store.ProfileSummary) error {
		out = append(out, ps.Path())
		return nil
	})
	return out, err
}

func (o *offline) Versions(ctx context.Context, profile string) (*versionsResult, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	latest, vs, err := o.st.Versions(ctx, keys)
	if err != nil {
		return nil, err
	}
	return &versionsResult{Path: store.ProfilePath(keys), Latest: store.VersionName(latest), Versions: vs}, nil
}

func (o *offline) Schema(ctx context.Context, profile, version string) (*arrow.Schema, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	v := -1
	if version != "" {
		if v, err = store.ParseVersion(version); err != nil {
			return nil, err
		}
	}
	return o.st.Schema(ctx, keys, v)
}

func (o *offline) Lineage(ctx context.Context, profile string, w io.Writer) error {
	keys, err := keysOf(profile)
	if err != nil {
		return err
	}
	return o.st.WriteLineage(ctx, w, keys)
}

func (o *offline) Verify(ctx context.Context, r verifyRequest) (*maint.VerifyReport, error) {
	keys, err := catalog.ParsePrefix(r.prefix)
	if err != nil {
		return nil, err
	}
	return maint.Verify(ctx, o.st, maint.VerifyOptions{Prefix: keys, Sample: r.sample, Seed: r.seed})
}

func (o *offline) GC(ctx context.Context, profile string, keep int, grace *time.Duration) (*maint.RetentionReport, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	g := maint.DefaultRetentionGrace
	if grace != nil {
		g = *grace
	}
	return maint.RemoveOldVersions(ctx, o.st, keys, keep, g, "")
}

func (o *offline) Compact(ctx context.Context, profile string) (*store.CommitRecord, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	return o.st.Compact(ctx, keys, store.CompactOptions{})
}

func (o *offline) Sweep(ctx context.Context, olderThan *time.Duration) (*maint.SweepReport, error) {
	d := maint.DefaultStaleAfter
	if olderThan != nil {
		d = *olderThan
	}
	return maint.Sweep(ctx, o.st, d)
}

func (o *offline) BreakLock(ctx context.Context, profile string) (*store.BreakLockResult, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	return o.st.BreakLock(ctx, keys)
}

func (o *offline) Close() error { return nil }

// remote runs admin subcommands as Flight actions on a server.
type remote struct {
	cl flight.Client
}

func (r *remote) Close() error { return r.cl.Close() }

// action runs one action and hands each result body to fn.
func (r *remote) action(ctx context.Context, typ string, body any, fn func([]byte) error) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	stream, err := r.cl.DoAction(ctx, &flight.Action{Type: typ, Body: b})
	if err != nil {
		return err
	}
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(res.Body); err != nil {
			return err
		}
	}
}

// action1 runs an action that answers one JSON object into out.
func (r *remote) action1(ctx context.Context, typ string, body, out any) error {
	n := 0
	err := r.action(ctx, typ, body, func(b []byte) error {
		n++
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s result is not what this quiver understands: %w", typ, err)
		}
		return nil
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("%s answered %d results, not 1", typ, n)
	}
	return err
}

func (r *remote) Profiles(ctx context.Context, prefix string) ([]string, error) {
	stream, err := r.cl.ListFlights(ctx, &flight.Criteria{Expression: []byte(prefix)})
	if err != nil {
		return nil, err
	}
	var out []string
	for {
		fi, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if d := fi.GetFlightDescriptor(); d != nil {
			out = append(out, store.ProfilePath(d.Path))
		}
	}
}

func (r *remote) Versions(ctx context.Context, profile string) (*versionsResult, error) {
	var v versionsResult
	return &v, r.action1(ctx, catalog.ActionListVersions, map[string]string{"path": profile}, &v)
}

func (r *remote) Schema(ctx context.Context, profile, version string) (*arrow.Schema, error) {
	d := readDescriptor{Path: profile}
	if version != "" {
		d.Version = version
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	res, err := r.cl.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: b})
	if err != nil {
		return nil, err
	}
	return flight.DeserializeSchema(res.GetSchema(), memory.DefaultAllocator)
}

func (r *remote) Lineage(ctx context.Context, profile string, w io.Writer) error {
	return r.action(ctx, catalog.ActionLineage, map[string]string{"path": profile}, func(b []byte) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

func (r *remote) Verify(ctx context.Context, v verifyRequest) (*maint.VerifyReport, error) {
	body := map[string]any{}
	if v.prefix != "" {
		body["prefix"] = v.prefix
	}
	if v.sample != 0 {
		body["sample"] = v.sample
		body["seed"] = v.seed
	}
	var rep maint.VerifyReport
	return &rep, r.action1(ctx, catalog.ActionVerify, body, &rep)
}

func (r *remote) GC(ctx context.Context, profile string, keep int, grace *time.Duration) (*maint.RetentionReport, error) {
	body := map[string]any{"path": profile, "keep": keep}
	if grace != nil {
		body["grace_s"] = grace.Seconds()
	}
	var rep maint.RetentionReport
	return &rep, r.action1(ctx, catalog.ActionRemoveOldVersions, body, &rep)
}

func (r *remote) Compact(ctx context.Context, profile string) (*store.CommitRecord, error) {
	var rec store.CommitRecord
	return &rec, r.action1(ctx, catalog.ActionCompact, map[string]string{"path": profile}, &rec)
}

func (r *remote) Sweep(ctx context.Context, olderThan *time.Duration) (*maint.SweepReport, error) {
	body := map[string]any{}
	if olderThan != nil {
		body["older_than_s"] = olderThan.Seconds()
	}
	var rep maint.SweepReport
	return &rep, r.action1(ctx, catalog.ActionSweep, body, &rep)
}

func (r *remote) BreakLock(ctx context.Context, profile string) (*store.BreakLockResult, error) {
	var res store.BreakLockResult
	return &res, r.action1(ctx, catalog.ActionBreakLock, map[string]string{"path": profile}, &res)
}
