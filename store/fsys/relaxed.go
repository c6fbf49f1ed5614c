package fsys

import "context"

// Sync says how much of one call must be durable when it returns. The
// methods of FS are always SyncFull; Relaxed offers the others for
// objects whose loss in a machine crash costs nothing, or whose directory
// is synced once for many (SyncDir).
type Sync uint8

const (
	// SyncFull: the object's content and its name survive a crash of the
	// machine once the call returned nil (every FS method).
	SyncFull Sync = iota
	// SyncContent: the content is durable before the name appears, but
	// the name itself is durable only after a later SyncDir of its
	// directory returned nil (or any other full sync of that directory).
	// After a machine crash the object is then either absent or whole.
	SyncContent
	// SyncNone: nothing is synced. A crash of the process loses nothing
	// (the operating system has it); a crash of the machine may lose the
	// object, or leave it empty. Meant for hints and locks whose loss is
	// harmless.
	SyncNone
)

// Relaxed is implemented by storage whose durability costs a separate
// step per call (local disks: fsync of the file and of its directory).
// Object stores, durable at every call, need not implement it: the
// package functions below then fall back to the FS methods, which are
// SyncFull. Visibility and atomicity are those of the FS method of the
// same name whatever the Sync: only durability is relaxed.
type Relaxed interface {
	// CreateExclusiveSync is CreateExclusive with the given durability.
	CreateExclusiveSync(ctx context.Context, name string, data []byte, sync Sync) error
	// CreateSync is Create whose Writer's Commit has the given durability.
	CreateSync(ctx context.Context, name string, sync Sync) (Writer, error)
	// ReplaceSync is Replace with the given durability.
	ReplaceSync(ctx context.Context, name string, data []byte, ifMatch Token, sync Sync) error
	// DeleteSync is Delete; the removal is durable only with SyncFull.
	DeleteSync(ctx context.Context, name string, sync Sync) error
	// SyncDir makes every name created or removed in dir ("" is the
	// root) durable.
	SyncDir(ctx context.Context, dir string) error
}

// CreateExclusiveSync is f.CreateExclusive with the durability sync where
// f offers it (Relaxed), else with SyncFull.
func CreateExclusiveSync(ctx context.Context, f FS, name string, data []byte, sync Sync) error {
	if r, ok := f.(Relaxed); ok && sync != SyncFull {
		return r.CreateExclusiveSync(ctx, name, data, sync)
	}
	return f.CreateExclusive(ctx, name, data)
}

// CreateSync is f.Create with the durability sync where f offers it.
func CreateSync(ctx context.Context, f FS, name string, sync Sync) (Writer, error) {
	if r, ok := f.(Relaxed); ok && sync != SyncFull {
		return r.CreateSync(ctx, name, sync)
	}
	return f.Create(ctx, name)
}

// ReplaceSync is f.Replace with the durability sync where f offers it.
func ReplaceSync(ctx context.Context, f FS, name string, data []byte, ifMatch Token, sync Sync) error {
	if r, ok := f.(Relaxed); ok && sync != SyncFull {
		return r.ReplaceSync(ctx, name, data, ifMatch, sync)
	}
	return f.Replace(ctx, name, data, ifMatch)
}

// DeleteSync is f.Delete with the durability sync where f offers it.
func DeleteSync(ctx context.Context, f FS, name string, sync Sync) error {
	if r, ok := f.(Relaxed); ok && sync != SyncFull {
		return r.DeleteSync(ctx, name, sync)
	}
	return f.Delete(ctx, name)
}

// SyncDir makes the names in dir durable where f is Relaxed (elsewhere
// every call was durable already, and it does nothing).
func SyncDir(ctx context.Context, f FS, dir string) error {
	if r, ok := f.(Relaxed); ok {
		return r.SyncDir(ctx, dir)
	}
	return ctx.Err()
}

// DataSyncer is implemented by Writers whose content can be made durable
// before Commit (local disks), so that the sync can overlap other work;
// Commit then only publishes the name (and syncs the directory with
// SyncFull).
type DataSyncer interface {
	// Sync makes what was written so far durable.
	Sync(ctx context.Context) error
}

// IsRelaxed reports whether f offers relaxed durability (Relaxed).
func IsRelaxed(f FS) bool {
	_, ok := f.(Relaxed)
	return ok
}

// ReplaceStager is implemented by storage that can write a replacement's
// content ahead of the replace itself (local disks: a synced temp file,
// renamed over the name later), so that its sync overlaps other work and
// the replace itself is one quick step.
type ReplaceStager interface {
	// StageReplace writes data, its content synced, where the returned
	// StagedReplace's Replace will find it. Nothing changes at name until
	// then.
	StageReplace(ctx context.Context, name string, data []byte) (StagedReplace, error)
}

// StagedReplace is a replacement of one object, staged. Replace may be
// called again after ErrPrecondition; Abort must be called unless a
// Replace returned nil.
type StagedReplace interface {
	// Replace is ReplaceSync(name, data, ifMatch, SyncContent) with the
	// staged data: it puts it at name if name's current Token is ifMatch,
	// else fails with ErrPrecondition and keeps it staged.
	Replace(ctx context.Context, ifMatch Token) error
	// Abort discards the staged data (a no-op after a successful Replace).
	Abort() error
}

// StageReplace stages data to replace name: on a ReplaceStager its content
// is written and synced now; elsewhere it is kept in memory and the
// Replace is ReplaceSync(SyncContent) then.
func StageReplace(ctx context.Context, f FS, name string, data []byte) (StagedReplace, error) {
	if r, ok := f.(ReplaceStager); ok {
		return r.StageReplace(ctx, name, data)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &laterReplace{f: f, name: name, data: data}, nil
}

// laterReplace is StageReplace on storage that cannot stage.
type laterReplace struct {
	f    FS
	name string
	data []byte
}

func (r *laterReplace) Replace(ctx context.Context, ifMatch Token) error {
	return ReplaceSync(ctx, r.f, r.name, r.data, ifMatch, SyncContent)
}

func (r *laterReplace) Abort() error { return nil }
