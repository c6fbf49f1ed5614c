package fsys

import "context"

// Marker is implemented by storage that can create empty marker objects
// (the .claim of an index) for less than a file of their own: Local links
// one shared empty inode under each marker's name, so a marker costs a
// directory entry instead of a new inode (creating an inode made most of
// the CPU of many concurrent small appends).
type Marker interface {
	// CreateMarker creates the empty object name exclusively, with
	// CreateExclusive's visibility and SyncContent's durability (the name
	// is durable after a SyncDir of its directory): fs.ErrExist when
	// name exists. Markers must not be written: several may be one
	// object.
	CreateMarker(ctx context.Context, name string) error
}

// CreateMarker creates the empty marker name exclusively: through f's
// Marker where it has one, else CreateExclusiveSync with SyncContent.
func CreateMarker(ctx context.Context, f FS, name string) error {
	if m, ok := f.(Marker); ok {
		return m.CreateMarker(ctx, name)
	}
	return CreateExclusiveSync(ctx, f, name, nil, SyncContent)
}
