package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/s3fs"
)

// storageFlags say how to reach a data directory on S3
// (--data-dir s3://bucket/prefix). Credentials come from the AWS SDK's
// standard chain (AWS_ACCESS_KEY_ID…, ~/.aws, SSO, instance roles).
type storageFlags struct {
	endpoint  string
	pathStyle bool
	region    string
}

func addStorageFlags(f *pflag.FlagSet, s *storageFlags) {
	f.StringVar(&s.endpoint, "s3-endpoint", env("QUIVER_S3_ENDPOINT", ""), "URL of an S3-compatible service for an s3:// data dir, e.g. http://127.0.0.1:7070 (default: AWS) (env QUIVER_S3_ENDPOINT)")
	f.BoolVar(&s.pathStyle, "s3-path-style", envBool("QUIVER_S3_PATH_STYLE"), "address the bucket in the URL path, as most S3-compatible services need (env QUIVER_S3_PATH_STYLE)")
	f.StringVar(&s.region, "s3-region", env("QUIVER_S3_REGION", ""), "region of the bucket (default: AWS_REGION or the AWS config, else us-east-1) (env QUIVER_S3_REGION)")
}

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

// s3Config is the s3fs configuration of an s3:// data dir.
func s3Config(dataDir string, sf storageFlags) (s3fs.Config, error) {
	bucket, prefix, err := s3fs.ParseURL(dataDir)
	if err != nil {
		return s3fs.Config{}, fmt.Errorf("--data-dir: %w", err)
	}
	return s3fs.Config{Bucket: bucket, Prefix: prefix, Endpoint: sf.endpoint, PathStyle: sf.pathStyle, Region: sf.region}, nil
}

// openS3 opens an s3:// data dir for a server. It first probes which
// conditional requests the service honours: without conditional PutObject
// no lock or commit would be safe, so it refuses to start; without
// conditional CompleteMultipartUpload it falls back to a HEAD before each
// completion (safe for the store, whose data file names are claimed
// exclusively first) and says so.
func openS3(ctx context.Context, dataDir string, sf storageFlags, log zerolog.Logger) (fsys.FS, error) {
	cfg, err := s3Config(dataDir, sf)
	if err != nil {
		return nil, err
	}
	f, err := s3fs.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sup, err := f.Probe(ctx)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	if err := sup.Require(); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	if !sup.ConditionalComplete {
		log.Warn().Msg("the object store cannot complete multipart uploads conditionally (If-None-Match); checking with HEAD before each completion instead")
		cfg.NoConditionalComplete = true
		if f, err = s3fs.New(ctx, cfg); err != nil {
			return nil, err
		}
	}
	log.Info().Interface("support", sup).Msg("object store probed")
	return f, nil
}

// openOfflineS3 opens an existing s3:// data dir for an admin command. It
// makes no probe (which writes, and an auditor's credentials may be
// read-only) and refuses a prefix that holds nothing, so that a mistyped
// --data-dir is an error and not an empty store.
func openOfflineS3(ctx context.Context, dataDir string, sf storageFlags) (fsys.FS, error) {
	cfg, err := s3Config(dataDir, sf)
	if err != nil {
		return nil, err
	}
	f, err := s3fs.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := f.List(ctx, ""); errors.Is(err, fsys.ErrNotExist) {
		return nil, fmt.Errorf("data dir %s does not exist (nothing under that prefix)", dataDir)
	} else if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	return f, nil
}

// storageOption is the store option of an s3:// data dir for a server
// (none for a local directory, which store.Open opens itself).
func storageOption(ctx context.Context, dataDir string, sf storageFlags, log zerolog.Logger) ([]store.Option, error) {
	if !s3fs.IsURL(dataDir) {
		return nil, nil
	}
	f, err := openS3(ctx, dataDir, sf, log)
	if err != nil {
		return nil, err
	}
	return []store.Option{store.WithFS(f)}, nil
}
