package maint_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/quiverdb/quiver/internal/s3test"
	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/s3fs"
	"github.com/quiverdb/quiver/store/maint"
)

// TestS3RefusalIsNeverAbsence: when the storage service refuses the
// server itself (its key rotated away, a wrong secret, a bucket gone), no
// answer may read as "absent". versitygw answers an unknown access key
// with HTTP 404 XAdminUserNotFound, which was taken for "no such object":
// a committed profile read NOT_FOUND, the listing came back empty, and
// verify said ok over no file at all (red team round 48's p02).
func TestS3RefusalIsNeverAbsence(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	good, err := s3fs.New(context.Background(), srv.Config(bucket, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Close() })
	gs, err := store.Open("test", store.WithFS(good))
	if err != nil {
		t.Fatal(err)
	}
	k := []string{"refused", "p"}
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	put(t, gs, store.ModeWrite, k, fromJSON(t, sc, `[{"id":1},{"id":2}]`), store.PutOptions{})

	for _, tc := range []struct {
		name string
		edit func(*s3fs.Config)
	}{
		// versitygw: 404 XAdminUserNotFound.
		{"unknown access key", func(c *s3fs.Config) {
			c.Credentials = credentials.NewStaticCredentialsProvider("rotated-away", s3test.SecretKey, "")
		}},
		// 403 SignatureDoesNotMatch.
		{"wrong secret", func(c *s3fs.Config) {
			c.Credentials = credentials.NewStaticCredentialsProvider(s3test.AccessKey, "not-the-secret", "")
		}},
		// 404 NoSuchBucket.
		{"no such bucket", func(c *s3fs.Config) { c.Bucket = bucket + "-gone" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := srv.Config(bucket, "data")
			cfg.MaxAttempts = 1
			tc.edit(&cfg)
			bad, err := s3fs.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			s, err := store.Open("test", store.WithFS(bad), store.WithLockTimeout(2e9))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			refused := func(what string, err error) {
				t.Helper()
				var ce *store.CorruptionError
				if !errors.Is(err, fsys.ErrDenied) || errors.Is(err, store.ErrNotFound) || errors.Is(err, fsys.ErrNotExist) ||
					errors.Is(err, store.ErrDataLoss) || errors.As(err, &ce) {
					t.Errorf("%s: %v, want the service's refusal (fsys.ErrDenied)", what, err)
				}
			}
			rdr, err := s.Read(ctx, k, store.ReadOptions{SnapshotOptions: store.SnapshotOptions{Version: store.Latest}})
			if err == nil {
				for rdr.Next() {
				}
				err = rdr.Err()
				rdr.Release()
			}
			refused("read", err)
			n := 0
			refused("list", s.ListProfiles(ctx, nil, func(store.ProfileSummary) error { n++; return nil }))
			_, _, err = s.Versions(ctx, k)
			refused("versions", err)
			rep, err := maint.Verify(ctx, s, maint.VerifyOptions{})
			if err == nil {
				t.Errorf("verify: %+v, want the service's refusal", rep)
			} else {
				refused("verify", err)
			}
			rep, err = maint.Verify(ctx, s, maint.VerifyOptions{Keys: k})
			if err == nil {
				t.Errorf("verify of %v: %+v, want the service's refusal", k, rep)
			} else {
				refused("verify of one profile", err)
			}
			sw, err := maint.Sweep(ctx, s, 0)
			if err == nil {
				t.Errorf("sweep: %+v, want the service's refusal", sw)
			} else {
				refused("sweep", err)
			}
			rd := fromJSON(t, sc, `[{"id":3}]`)
			_, err = s.Put(ctx, k, rd, store.PutOptions{Mode: store.ModeAppend, RequestID: "r1"})
			rd.Release()
			refused("append", err)
		})
	}
	// Nothing the refused stores did changed what the good one holds.
	if got := readIDs(t, gs, k, -1); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("after the refusals the profile holds %v, want [1 2]", got)
	}
	rep, err := maint.Verify(context.Background(), gs, maint.VerifyOptions{})
	if err != nil || !rep.OK || rep.CheckedFiles != 1 {
		t.Errorf("verify with good credentials: %+v, %v", rep, err)
	}
}
