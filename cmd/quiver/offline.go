package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/rs/zerolog"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys/s3fs"
	"github.com/quiverdb/quiver/store/maint"
)

// admin is what the admin subcommands need, from a server (Flight actions)
// or straight from a data dir (the store) when the server is down. Every
// method answers the JSON bodies of DESIGN.md §3.1, so both print alike.
type admin interface {
	// Profiles lists the profiles under a key prefix ("" for all).
	Profiles(ctx context.Context, prefix string) ([]string, error)
	Versions(ctx context.Context, profile string) (*catalog.ListVersionsResult, error)
	Schema(ctx context.Context, profile, version string) (*arrow.Schema, error)
	// Lineage writes the commit records as NDJSON, oldest first.
	Lineage(ctx context.Context, profile string, w io.Writer) error
	Verify(ctx context.Context, r client.VerifyRequest) (*catalog.VerifyResult, error)
	// GC removes old versions; grace nil means the default.
	GC(ctx context.Context, profile string, keep int, grace *time.Duration) (*catalog.RemoveOldVersionsResult, error)
	Compact(ctx context.Context, profile string) (*catalog.CompactResult, error)
	// Sweep removes stale temps; olderThan nil means the default.
	Sweep(ctx context.Context, olderThan *time.Duration) (*catalog.SweepResult, error)
	BreakLock(ctx context.Context, profile string) (*catalog.BreakLockResult, error)
	// SetSchemaPolicy sets a profile's schema policy ("additive", "none").
	SetSchemaPolicy(ctx context.Context, profile, policy string) (*catalog.SchemaPolicyResult, error)
	Close() error
}

// offline runs admin subcommands directly on a data dir.
type offline struct {
	st *store.Store
}

// openOffline opens an existing data dir; unlike `serve` it never creates
// one, so a mistyped --data-dir is an error and not an empty store.
func openOffline(ctx context.Context, dir string, sf storageFlags, stderr io.Writer) (*offline, error) {
	// Warnings (a broken lock, for one) go to the operator's terminal.
	log := zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: !colorOK(stderr), TimeFormat: time.RFC3339}).
		Level(zerolog.WarnLevel).With().Timestamp().Logger()
	opts := []store.Option{store.WithLogger(log)}
	if s3fs.IsURL(dir) {
		f, err := openOfflineS3(ctx, dir, sf)
		if err != nil {
			return nil, err
		}
		opts = append(opts, store.WithFS(f))
	} else {
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
	}
	st, err := store.Open(dir, opts...)
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

func (o *offline) Versions(ctx context.Context, profile string) (*catalog.ListVersionsResult, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	latest, vs, err := o.st.Versions(ctx, keys)
	if err != nil {
		return nil, err
	}
	res := catalog.ListVersionsResultFrom(keys, latest, vs)
	if sp, err := o.st.Policy(ctx, keys); err == nil && sp.SchemaPolicy != store.PolicyNone {
		res.SchemaPolicy = sp.SchemaPolicy
	}
	return res, nil
}

func (o *offline) Schema(ctx context.Context, profile, version string) (*arrow.Schema, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	v := catalog.Latest
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

func (o *offline) Verify(ctx context.Context, r client.VerifyRequest) (*catalog.VerifyResult, error) {
	keys, err := catalog.ParsePrefix(r.Prefix)
	if err != nil {
		return nil, err
	}
	opts := maint.VerifyOptions{Prefix: keys, Sample: r.Sample, Seed: r.Seed}
	if r.Path != "" {
		if opts.Keys, err = keysOf(r.Path); err != nil {
			return nil, err
		}
	}
	if r.PublicKey != "" {
		if opts.PublicKey, err = store.ParsePublicKey([]byte(r.PublicKey)); err != nil {
			return nil, err
		}
	}
	rep, err := maint.Verify(ctx, o.st, opts)
	if err != nil {
		return nil, err
	}
	return catalog.VerifyResultFrom(rep), nil
}

func (o *offline) GC(ctx context.Context, profile string, keep int, grace *time.Duration) (*catalog.RemoveOldVersionsResult, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	g := catalog.DefaultGrace
	if grace != nil {
		g = *grace
	}
	rep, err := maint.RemoveOldVersions(ctx, o.st, keys, keep, g, "")
	if err != nil {
		return nil, err
	}
	return catalog.RemoveOldVersionsResultFrom(rep), nil
}

func (o *offline) Compact(ctx context.Context, profile string) (*catalog.CompactResult, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	cr, err := o.st.Compact(ctx, keys, store.CompactOptions{})
	if err != nil {
		return nil, err
	}
	return catalog.PutResultFrom(cr), nil
}

func (o *offline) Sweep(ctx context.Context, olderThan *time.Duration) (*catalog.SweepResult, error) {
	d := catalog.DefaultSweepAge
	if olderThan != nil {
		d = *olderThan
	}
	rep, err := maint.Sweep(ctx, o.st, d)
	if err != nil {
		return nil, err
	}
	return catalog.SweepResultFrom(rep), nil
}

func (o *offline) BreakLock(ctx context.Context, profile string) (*catalog.BreakLockResult, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	res, err := o.st.BreakLock(ctx, keys)
	if err != nil {
		return nil, err
	}
	return catalog.BreakLockResultFrom(res), nil
}

func (o *offline) SetSchemaPolicy(ctx context.Context, profile, policy string) (*catalog.SchemaPolicyResult, error) {
	keys, err := keysOf(profile)
	if err != nil {
		return nil, err
	}
	sp, err := o.st.SetPolicy(ctx, keys, policy, "")
	if err != nil {
		return nil, err
	}
	return catalog.SchemaPolicyResultFrom(keys, sp), nil
}

func (o *offline) Close() error { return o.st.Close() }

// remote runs admin subcommands on a server, through the client.
type remote struct {
	c *client.Client
}

func (r *remote) Close() error { return r.c.Close() }

func (r *remote) Profiles(ctx context.Context, prefix string) ([]string, error) {
	ps, err := r.c.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Path)
	}
	return out, nil
}

func (r *remote) Versions(ctx context.Context, profile string) (*catalog.ListVersionsResult, error) {
	return r.c.ListVersions(ctx, profile)
}

func (r *remote) Schema(ctx context.Context, profile, version string) (*arrow.Schema, error) {
	return r.c.Schema(ctx, client.ReadRequest{Path: profile, Version: version})
}

// Lineage prints the server's records verbatim, so that fields this quiver
// does not know are kept.
func (r *remote) Lineage(ctx context.Context, profile string, w io.Writer) error {
	return r.c.DoAction(ctx, catalog.ActionLineage, catalog.PathBody{Path: profile}, func(b []byte) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

func (r *remote) Verify(ctx context.Context, v client.VerifyRequest) (*catalog.VerifyResult, error) {
	return r.c.Verify(ctx, v)
}

func (r *remote) GC(ctx context.Context, profile string, keep int, grace *time.Duration) (*catalog.RemoveOldVersionsResult, error) {
	return r.c.RemoveOldVersions(ctx, client.RemoveOldVersionsRequest{Path: profile, Keep: keep, Grace: grace})
}

func (r *remote) Compact(ctx context.Context, profile string) (*catalog.CompactResult, error) {
	return r.c.Compact(ctx, profile)
}

func (r *remote) Sweep(ctx context.Context, olderThan *time.Duration) (*catalog.SweepResult, error) {
	return r.c.Sweep(ctx, client.SweepRequest{OlderThan: olderThan})
}

func (r *remote) BreakLock(ctx context.Context, profile string) (*catalog.BreakLockResult, error) {
	return r.c.BreakLock(ctx, profile)
}

func (r *remote) SetSchemaPolicy(ctx context.Context, profile, policy string) (*catalog.SchemaPolicyResult, error) {
	return r.c.SetSchemaPolicy(ctx, profile, policy)
}
