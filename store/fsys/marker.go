package fsys

import (
	"context"
	"path"
)

// Marker is implemented by storage that can create empty marker objects
// (the .claim of an index) for less than a file of their own: Local links
// one shared empty inode under each marker's name, so a marker costs a
// directory entry instead of a new inode (creating an inode made most of
// the CPU of many concurrent small appends).
type Marker interface {
	// CreateMarker creates the object name exclusively, with
	// CreateExclusive's visibility and SyncContent's durability (the name
	// is durable after a SyncDir of its directory): fs.ErrExist when
	// name exists. It is empty, or holds what every marker of this
	// storage holds (Local's SetMarkerContent). Markers must not be
	// written: several may be one object.
	CreateMarker(ctx context.Context, name string) error
}

// CreateMarker creates the marker name exclusively: through f's Marker
// where it has one, else an empty file (CreateExclusiveSync with
// SyncContent).
func CreateMarker(ctx context.Context, f FS, name string) error {
	if m, ok := f.(Marker); ok {
		return m.CreateMarker(ctx, name)
	}
	return CreateExclusiveSync(ctx, f, name, nil, SyncContent)
}

// PairStater is implemented by storage that can stat a directory and one
// name in it for the price of one lookup of the directory (Local: one
// open, two stats), where a read checks both to tell whether what it kept
// still holds.
type PairStater interface {
	// StatPair is Stat(dir) and Stat(dir/name); errName is the latter's
	// error (the pair's err is the directory's).
	StatPair(ctx context.Context, dir, name string) (d, e Entry, errName, err error)
}

// StatPair stats dir and dir/name: through f's PairStater where it has
// one, else with two Stats.
func StatPair(ctx context.Context, f FS, dir, name string) (d, e Entry, errName, err error) {
	if ps, ok := f.(PairStater); ok {
		return ps.StatPair(ctx, dir, name)
	}
	if d, err = f.Stat(ctx, dir); err != nil {
		return Entry{}, Entry{}, nil, err
	}
	e, errName = f.Stat(ctx, path.Join(dir, name))
	return d, e, errName, nil
}
