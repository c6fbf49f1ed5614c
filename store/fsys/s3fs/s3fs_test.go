package s3fs_test

import (
	"testing"

	"github.com/quiverdb/quiver/internal/s3test"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
	"github.com/quiverdb/quiver/store/fsys/fsystest"
	"github.com/quiverdb/quiver/store/fsys/s3fs"
)

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	fsystest.Run(t, func(t *testing.T) fsys.FS { return srv.FS(t) })
}

// TestConformanceFaultFS: the fault-injecting wrapper over S3 (no rule
// active) is still a conforming FS.
func TestConformanceFaultFS(t *testing.T) {
	srv := s3test.Start(t)
	fsystest.Run(t, func(t *testing.T) fsys.FS { return faultfs.New(srv.FS(t)) })
}

// TestProbeVersitygw records what the test server honours: every
// conditional request Quiver uses.
func TestProbeVersitygw(t *testing.T) {
	srv := s3test.Start(t)
	f := srv.FS(t)
	sup, err := f.Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := s3fs.Support{ConditionalCreate: true, ConditionalReplace: true, ConditionalComplete: true, ConditionalDelete: true}
	if sup != want {
		t.Errorf("Probe = %+v, want %+v", sup, want)
	}
	if err := sup.Require(); err != nil {
		t.Error(err)
	}
	// The probe cleans up after itself.
	if entries, err := f.List(t.Context(), ""); err == nil {
		t.Errorf("List(root) after Probe = %v, want nothing", entries)
	}
}
