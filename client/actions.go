package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/catalog"
)

// DoAction runs the action typ (one of catalog's Action* names) with body
// marshalled as JSON (a []byte or json.RawMessage is sent as is; nil is
// {}) and hands each result body to fn, in order. An error from fn stops
// the action and is returned.
func (c *Client) DoAction(ctx context.Context, typ string, body any, fn func(result []byte) error) error {
	var b []byte
	switch v := body.(type) {
	case nil:
		b = []byte("{}")
	case []byte:
		b = v
	case json.RawMessage:
		b = v
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%s body: %w", typ, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.fc.DoAction(ctx, &flight.Action{Type: typ, Body: b})
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
		if err := fn(res.GetBody()); err != nil {
			return err
		}
	}
}

// action1 runs an action that answers one JSON object into out.
func (c *Client) action1(ctx context.Context, typ string, body, out any) error {
	n := 0
	err := c.DoAction(ctx, typ, body, func(b []byte) error {
		n++
		if n > 1 {
			return nil // counted below; the stream is read to its end
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%w: %s result: %w", ErrUnexpectedResult, typ, err)
		}
		return nil
	})
	if err == nil && n != 1 {
		err = fmt.Errorf("%w: %s answered %d results, not 1", ErrUnexpectedResult, typ, n)
	}
	return err
}

// ListVersions lists every version of the profile at path, oldest first,
// and names the latest.
func (c *Client) ListVersions(ctx context.Context, path string) (*catalog.ListVersionsResult, error) {
	var r catalog.ListVersionsResult
	if err := c.action1(ctx, catalog.ActionListVersions, catalog.PathBody{Path: path}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// VerifyRequest selects what Verify checks: one profile (Path), the
// profiles under a key prefix (Prefix), or (both empty) all of them.
type VerifyRequest struct {
	Path   string
	Prefix string
	// Sample re-hashes only this fraction of the files, 0 < Sample <= 1
	// (every file is still listed and its size compared); 0 is all.
	Sample float64
	// Seed picks the sample: the same seed checks the same files.
	Seed int64
	// PublicKey (PEM, or 32 bytes in hex or base64), when set, requires
	// every commit record to carry a valid signature by its private key.
	PublicKey string
}

// Verify re-hashes committed files against their commit records and
// reports every problem (catalog.Problem* kinds). A store with problems is
// not an error: check OK and Problems.
func (c *Client) Verify(ctx context.Context, r VerifyRequest) (*catalog.VerifyResult, error) {
	var res catalog.VerifyResult
	body := catalog.VerifyBody{Path: r.Path, Prefix: r.Prefix, Sample: r.Sample, Seed: r.Seed, PublicKey: r.PublicKey}
	if err := c.action1(ctx, catalog.ActionVerify, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Lineage yields the commit records of the profile at path, oldest first,
// as they stream in. An error ends the sequence (yielded with a nil
// record); stopping early cancels the stream.
func (c *Client) Lineage(ctx context.Context, path string) iter.Seq2[*catalog.LineageRecord, error] {
	return func(yield func(*catalog.LineageRecord, error) bool) {
		errStop := errors.New("stop")
		err := c.DoAction(ctx, catalog.ActionLineage, catalog.PathBody{Path: path}, func(b []byte) error {
			var r catalog.LineageRecord
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("%w: lineage record: %w", ErrUnexpectedResult, err)
			}
			if !yield(&r, nil) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			yield(nil, err)
		}
	}
}

// RemoveOldVersionsRequest says which versions of a profile to remove.
type RemoveOldVersionsRequest struct {
	Path string
	// Keep is how many newest versions stay; at least 1 (0 is refused
	// with InvalidArgument, never taken as a default).
	Keep int
	// Grace keeps versions superseded less than this long ago; nil is the
	// server's (catalog.DefaultGrace unless configured), 0 removes at once.
	Grace *time.Duration
}

// RemoveOldVersions removes whole old versions of a profile. The latest
// is never removed; versions it keeps for a reason are in Kept.
func (c *Client) RemoveOldVersions(ctx context.Context, r RemoveOldVersionsRequest) (*catalog.RemoveOldVersionsResult, error) {
	body := catalog.RemoveOldVersionsBody{Path: r.Path, Keep: r.Keep}
	if r.Grace != nil {
		s := r.Grace.Seconds()
		body.GraceS = &s
	}
	var res catalog.RemoveOldVersionsResult
	if err := c.action1(ctx, catalog.ActionRemoveOldVersions, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SweepRequest says what Sweep removes.
type SweepRequest struct {
	// OlderThan is the age after which leftovers are removed; nil is the
	// server's (catalog.DefaultSweepAge).
	OlderThan *time.Duration
}

// Sweep removes what killed writers left behind in every profile: stale
// temps, uncommitted files, abandoned versions. Committed data is never
// touched.
func (c *Client) Sweep(ctx context.Context, r SweepRequest) (*catalog.SweepResult, error) {
	var body catalog.SweepBody
	if r.OlderThan != nil {
		s := r.OlderThan.Seconds()
		body.OlderThanS = &s
	}
	var res catalog.SweepResult
	if err := c.action1(ctx, catalog.ActionSweep, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// BreakLock breaks the profile's manifest lock if its owner is provably
// gone or it is older than the server's stale limit. A lock left alone is
// not an error: check Broken and Reason.
func (c *Client) BreakLock(ctx context.Context, path string) (*catalog.BreakLockResult, error) {
	var res catalog.BreakLockResult
	if err := c.action1(ctx, catalog.ActionBreakLock, catalog.PathBody{Path: path}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Compact rewrites the latest version of a profile as a new version with
// few large files and returns its commit record.
func (c *Client) Compact(ctx context.Context, path string) (*catalog.CompactResult, error) {
	var res catalog.CompactResult
	if err := c.action1(ctx, catalog.ActionCompact, catalog.PathBody{Path: path}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SetSchemaPolicy sets a profile's schema policy (admin): "additive" (a
// write of a new version may only add nullable columns to the previous
// version's schema, or keep it) or "none".
func (c *Client) SetSchemaPolicy(ctx context.Context, path, policy string) (*catalog.SchemaPolicyResult, error) {
	var res catalog.SchemaPolicyResult
	body := map[string]string{"path": path, "schema_policy": policy}
	if err := c.action1(ctx, catalog.ActionSetSchemaPolicy, body, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
