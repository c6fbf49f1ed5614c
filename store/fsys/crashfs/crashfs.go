package crashfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/quiverdb/quiver/store/fsys"
)

// Tear says what survives of a file's unsynced bytes in a crash.
type Tear uint8

const (
	// TearEmpty: nothing unsynced survives; a file holds the bytes synced
	// last (a file never synced comes back empty). The worst case, and
	// the default.
	TearEmpty Tear = iota
	// TearPrefix: a random prefix of the unsynced bytes survives after
	// the synced ones.
	TearPrefix
	// TearKeep: every byte written survives (the lucky case).
	TearKeep
	// TearMixed: each file draws one of the above.
	TearMixed
)

// Options configure an FS.
type Options struct {
	// Tear is what survives of unsynced content (default TearEmpty).
	Tear Tear
	// Seed seeds the random choices of TearPrefix and TearMixed.
	Seed uint64
}

// Modes of the files crashfs models, as fsys.Local makes them.
const (
	filePerm     = 0o644
	readOnlyPerm = 0o444 // committed through Create
	dirPerm      = 0o755
)

// node is a file (an inode: several names may link it) or a directory in
// the model.
type node struct {
	dir bool
	// A file: what was written, and how much of it is durable.
	data   []byte
	synced int
	mode   os.FileMode
	// A directory: its entries as they are (cur) and as a crash leaves
	// them (dur).
	cur, dur map[string]*node
}

func newDir() *node { return &node{dir: true, cur: map[string]*node{}, dur: map[string]*node{}} }

// sync makes every entry of the directory durable.
func (d *node) sync() {
	d.dur = make(map[string]*node, len(d.cur))
	for k, v := range d.cur {
		d.dur[k] = v
	}
}

// FS wraps an fsys.FS and models what a power loss would leave of it (see
// the package documentation). It is safe for concurrent use.
type FS struct {
	inner fsys.FS
	opts  Options

	// gate: calls that sync no directory hold it shared, calls that do
	// hold it alone (see the package documentation).
	gate sync.RWMutex

	mu       sync.Mutex // guards everything below
	root     *node
	rng      *mrand.Rand
	diverged []string // what the model could not follow
}

// New wraps inner. Whatever inner holds already is taken as durable.
func New(ctx context.Context, inner fsys.FS, opts Options) (*FS, error) {
	f := &FS{inner: inner, opts: opts, root: newDir(), rng: mrand.New(mrand.NewPCG(opts.Seed, 0x6372617368))}
	if err := f.load(ctx, "", f.root); err != nil {
		return nil, fmt.Errorf("crashfs: read what the storage holds: %w", err)
	}
	return f, nil
}

// load reads the tree under dir into d, all of it durable.
func (f *FS) load(ctx context.Context, dir string, d *node) error {
	entries, err := f.inner.List(ctx, dir)
	if errors.Is(err, fsys.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := path.Join(dir, e.Name)
		switch {
		case e.Link || e.Special:
			continue
		case e.Dir:
			sub := newDir()
			if err := f.load(ctx, name, sub); err != nil {
				return err
			}
			d.cur[e.Name] = sub
		default:
			data, err := readAll(ctx, f.inner, name)
			if err != nil {
				return err
			}
			d.cur[e.Name] = &node{data: data, synced: len(data), mode: filePerm}
		}
	}
	d.sync()
	return nil
}

func readAll(ctx context.Context, f fsys.FS, name string) ([]byte, error) {
	r, err := f.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Inner is the wrapped FS.
func (f *FS) Inner() fsys.FS { return f.inner }

// Close closes the wrapped FS if it has a Close method.
func (f *FS) Close() error {
	if c, ok := f.inner.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// split cuts name into its directory ("" for the root) and base.
func split(name string) (dir, base string) {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

// lookup finds the directory dir in the model as it is now; nil if it is
// not there. Callers hold f.mu.
func (f *FS) lookup(dir string) *node {
	d := f.root
	if dir == "" {
		return d
	}
	for _, comp := range strings.Split(dir, "/") {
		n := d.cur[comp]
		if n == nil || !n.dir {
			return nil
		}
		d = n
	}
	return d
}

// makeDirs is fsys.Local's mkdirAll in the model: each missing directory
// of dir is made and its parent synced; directories that exist are left
// as they are. Callers hold f.mu.
func (f *FS) makeDirs(dir string) *node {
	d := f.root
	if dir == "" {
		return d
	}
	for _, comp := range strings.Split(dir, "/") {
		n := d.cur[comp]
		if n == nil {
			n = newDir()
			d.cur[comp] = n
			d.sync()
		} else if !n.dir {
			f.divergef("%s: a file where a directory was made", dir)
			return nil
		}
		d = n
	}
	return d
}

// divergef records that the model lost track of the real storage.
// Callers hold f.mu.
func (f *FS) divergef(format string, args ...any) {
	f.diverged = append(f.diverged, fmt.Sprintf(format, args...))
}

// enter takes the gate for a call: alone when it syncs a directory
// (alone), or when it may create one (mkdir: the directory dir is
// missing); else shared. It returns the release.
func (f *FS) enter(alone, mkdir bool, dir string) func() {
	if !alone {
		f.gate.RLock()
		if !mkdir || f.exists(dir) {
			return f.gate.RUnlock
		}
		f.gate.RUnlock()
	}
	f.gate.Lock()
	return f.gate.Unlock
}

func (f *FS) exists(dir string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lookup(dir) != nil
}

// isDir reports whether name is a directory in the model.
func (f *FS) isDir(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir, base := split(name)
	d := f.lookup(dir)
	return d != nil && d.cur[base] != nil && d.cur[base].dir
}

// created records an object made by a create call: name holds data,
// synced unless sync is SyncNone, and the directory is synced for
// SyncFull. Callers hold f.mu.
func (f *FS) created(name string, data []byte, sync fsys.Sync, mode os.FileMode) {
	dir, base := split(name)
	d := f.makeDirs(dir)
	if d == nil {
		return
	}
	n := &node{data: append([]byte(nil), data...), mode: mode}
	if sync != fsys.SyncNone {
		n.synced = len(n.data)
	}
	d.cur[base] = n
	if sync == fsys.SyncFull {
		d.sync()
	}
}

// CreateExclusive implements fsys.FS (SyncFull).
func (f *FS) CreateExclusive(ctx context.Context, name string, data []byte) error {
	return f.CreateExclusiveSync(ctx, name, data, fsys.SyncFull)
}

// CreateExclusiveSync implements fsys.Relaxed.
func (f *FS) CreateExclusiveSync(ctx context.Context, name string, data []byte, sync fsys.Sync) error {
	dir, _ := split(name)
	defer f.enter(sync == fsys.SyncFull, true, dir)()
	if err := fsys.CreateExclusiveSync(ctx, f.inner, name, data, sync); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created(name, data, sync, filePerm)
	return nil
}

// CreateMarker implements fsys.Marker: an object whose content is durable
// with it (empty, or what the inner storage puts in its markers: a local
// disk's SetMarkerContent) and whose name is durable after a SyncDir.
func (f *FS) CreateMarker(ctx context.Context, name string) error {
	dir, _ := split(name)
	defer f.enter(false, true, dir)()
	if err := fsys.CreateMarker(ctx, f.inner, name); err != nil {
		return err
	}
	data, _, err := f.inner.ReadFile(ctx, name)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created(name, data, fsys.SyncContent, filePerm)
	return nil
}

// Replace implements fsys.FS (SyncFull).
func (f *FS) Replace(ctx context.Context, name string, data []byte, ifMatch fsys.Token) error {
	return f.ReplaceSync(ctx, name, data, ifMatch, fsys.SyncFull)
}

// ReplaceSync implements fsys.Relaxed. The empty token creates (and may
// make directories); another renames a new object over the name, whose
// old one a crash brings back until the directory is synced.
func (f *FS) ReplaceSync(ctx context.Context, name string, data []byte, ifMatch fsys.Token, sync fsys.Sync) error {
	dir, base := split(name)
	defer f.enter(sync == fsys.SyncFull, ifMatch == "", dir)()
	if err := fsys.ReplaceSync(ctx, f.inner, name, data, ifMatch, sync); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ifMatch == "" {
		f.created(name, data, sync, filePerm)
		return nil
	}
	d := f.lookup(dir)
	if d == nil {
		f.divergef("replace %s: no directory in the model", name)
		return nil
	}
	n := &node{data: append([]byte(nil), data...), mode: filePerm}
	if sync != fsys.SyncNone {
		n.synced = len(n.data)
	}
	d.cur[base] = n
	if sync == fsys.SyncFull {
		d.sync()
	}
	return nil
}

// Delete implements fsys.FS (SyncFull).
func (f *FS) Delete(ctx context.Context, name string) error {
	return f.DeleteSync(ctx, name, fsys.SyncFull)
}

// DeleteSync implements fsys.Relaxed: the name comes back in a crash
// until its directory is synced. (fsys.Local syncs nothing when the name
// was missing.)
func (f *FS) DeleteSync(ctx context.Context, name string, sync fsys.Sync) error {
	// Removing a directory, even unsynced, goes alone: a directory others
	// are about to create in must not vanish under a shared call.
	defer f.enter(sync == fsys.SyncFull || f.isDir(name), false, "")()
	if err := fsys.DeleteSync(ctx, f.inner, name, sync); err != nil {
		return err
	}
	f.removed(name, sync)
	return nil
}

// DeleteAll implements fsys.FS: the tree's entry in its parent is removed
// and the parent synced.
func (f *FS) DeleteAll(ctx context.Context, dir string) error {
	defer f.enter(true, false, "")()
	if err := f.inner.DeleteAll(ctx, dir); err != nil {
		return err
	}
	f.removed(dir, fsys.SyncFull)
	return nil
}

func (f *FS) removed(name string, sync fsys.Sync) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir, base := split(name)
	d := f.lookup(dir)
	if d == nil || d.cur[base] == nil {
		return // fsys.Local returns at once, syncing nothing
	}
	delete(d.cur, base)
	if sync == fsys.SyncFull {
		d.sync()
	}
}

// Mkdir implements fsys.FS: the directory is made (and its missing
// parents, each synced into its own parent) and its parent synced.
func (f *FS) Mkdir(ctx context.Context, name string) error {
	defer f.enter(true, false, "")()
	if err := f.inner.Mkdir(ctx, name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	dir, base := split(name)
	d := f.makeDirs(dir)
	if d == nil {
		return nil
	}
	if d.cur[base] != nil {
		f.divergef("mkdir %s: the model has it already", name)
	}
	d.cur[base] = newDir()
	d.sync()
	return nil
}

// SyncDir implements fsys.Relaxed: every entry of dir becomes durable.
func (f *FS) SyncDir(ctx context.Context, dir string) error {
	defer f.enter(true, false, "")()
	if err := fsys.SyncDir(ctx, f.inner, dir); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.lookup(dir); d != nil {
		d.sync()
	} else {
		f.divergef("sync dir %s: no directory in the model", dir)
	}
	return nil
}

// Create implements fsys.FS (a Writer whose Commit is SyncFull).
func (f *FS) Create(ctx context.Context, name string) (fsys.Writer, error) {
	return f.CreateSync(ctx, name, fsys.SyncFull)
}

// CreateSync implements fsys.Relaxed. The Writer's temp file is an entry
// of the directory from now until Commit or Abort.
func (f *FS) CreateSync(ctx context.Context, name string, sync fsys.Sync) (fsys.Writer, error) {
	dir, base := split(name)
	defer f.enter(false, true, dir)()
	iw, err := fsys.CreateSync(ctx, f.inner, name, sync)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.makeDirs(dir)
	if d == nil {
		d = newDir() // diverged: follow the Writer in a detached directory
	}
	w := &writer{f: f, w: iw, sync: sync, dir: d, base: base, tmp: tempName(base), n: &node{mode: readOnlyPerm}}
	d.cur[w.tmp] = w.n
	if _, ok := iw.(fsys.DataSyncer); ok {
		return &syncWriter{w}, nil
	}
	return w, nil
}

// tempName is a hidden temp name for base, in fsys.Local's pattern.
func tempName(base string) string {
	var r [16]byte
	rand.Read(r[:])
	if len(base) > 200 {
		base = base[:200]
	}
	return "." + hex.EncodeToString(r[:]) + "." + base + fsys.TempSuffix
}

// writer is the FS's Writer: the wrapped one, and its object in the
// model (an entry under its temp name until Commit).
type writer struct {
	f         *FS
	w         fsys.Writer
	sync      fsys.Sync
	dir       *node // the directory it links into (fsys.Local holds it open)
	base, tmp string
	n         *node
	done      bool
}

func (w *writer) Write(p []byte) (int, error) {
	k, err := w.w.Write(p)
	if k > 0 {
		w.f.mu.Lock()
		w.n.data = append(w.n.data, p[:k]...)
		w.f.mu.Unlock()
	}
	return k, err
}

// Commit links the object to its name: its content synced unless the
// Writer is SyncNone, its directory only for SyncFull.
func (w *writer) Commit(ctx context.Context) error {
	f := w.f
	defer f.enter(w.sync == fsys.SyncFull, false, "")()
	err := w.w.Commit(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.done {
		return err
	}
	if err != nil {
		// fsys.Local's failed Commit removes its temp.
		if !errors.Is(err, fs.ErrClosed) {
			delete(w.dir.cur, w.tmp)
			w.done = true
		}
		return err
	}
	if w.sync != fsys.SyncNone {
		w.n.synced = len(w.n.data)
	}
	delete(w.dir.cur, w.tmp)
	w.dir.cur[w.base] = w.n
	if w.sync == fsys.SyncFull {
		w.dir.sync()
	}
	w.done = true
	return nil
}

// Abort discards the object: its temp entry goes (unsynced).
func (w *writer) Abort() error {
	err := w.w.Abort()
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if !w.done {
		delete(w.dir.cur, w.tmp)
		w.done = true
	}
	return err
}

// syncWriter is a writer whose wrapped Writer is an fsys.DataSyncer.
type syncWriter struct{ *writer }

// Sync implements fsys.DataSyncer: what was written so far is durable.
func (w *syncWriter) Sync(ctx context.Context) error {
	if err := w.w.(fsys.DataSyncer).Sync(ctx); err != nil {
		return err
	}
	w.f.mu.Lock()
	w.n.synced = len(w.n.data)
	w.f.mu.Unlock()
	return nil
}

// ReadFile implements fsys.FS (passed through).
func (f *FS) ReadFile(ctx context.Context, name string) ([]byte, fsys.Token, error) {
	return f.inner.ReadFile(ctx, name)
}

// Open implements fsys.FS (passed through).
func (f *FS) Open(ctx context.Context, name string) (fsys.File, error) {
	return f.inner.Open(ctx, name)
}

// Stat implements fsys.FS (passed through).
func (f *FS) Stat(ctx context.Context, name string) (fsys.Entry, error) {
	return f.inner.Stat(ctx, name)
}

// StatPair implements fsys.PairStater (passed through).
func (f *FS) StatPair(ctx context.Context, dir, name string) (d, e fsys.Entry, errName, err error) {
	return fsys.StatPair(ctx, f.inner, dir, name)
}

// List implements fsys.FS (passed through).
func (f *FS) List(ctx context.Context, dir string) ([]fsys.Entry, error) {
	return f.inner.List(ctx, dir)
}

// Image describes a crash image.
type Image struct {
	// Files and Dirs count what the image holds.
	Files, Dirs int
	// Lost counts the names that exist now but not in the image (made
	// since their directory was last synced), Revived the names the image
	// holds that are gone now (removed or replaced since).
	Lost, Revived int
	// Torn counts the files the image holds with less than was written
	// to them.
	Torn int
	// LostNames lists up to 20 of the lost names, for logs.
	LostNames []string
}

// imgEntry is one file or directory of an image.
type imgEntry struct {
	name string
	dir  bool
	data []byte
	mode os.FileMode
}

// Crash writes what a power loss at this instant would leave into the
// directory dir (created; it must be empty or absent), and describes it.
// It may be called while other goroutines use f: the image is one
// consistent cut.
func (f *FS) Crash(dir string) (*Image, error) { return f.CrashWith(dir, f.opts.Tear) }

// CrashWith is Crash with tear in place of the FS's Options.Tear.
func (f *FS) CrashWith(dir string, tear Tear) (*Image, error) {
	img := &Image{}
	f.mu.Lock()
	if len(f.diverged) > 0 {
		d := f.diverged
		f.mu.Unlock()
		return nil, fmt.Errorf("crashfs: the model lost track of the storage: %s", strings.Join(d, "; "))
	}
	var out []imgEntry
	f.image(f.root, "", tear, img, &out)
	f.mu.Unlock()
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("crashfs: crash image: %w", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		return nil, fmt.Errorf("crashfs: crash image: %s is not empty (%v)", dir, err)
	}
	for _, e := range out {
		p := filepath.Join(dir, filepath.FromSlash(e.name))
		var err error
		if e.dir {
			err = os.Mkdir(p, dirPerm)
		} else if err = os.WriteFile(p, e.data, filePerm); err == nil {
			err = os.Chmod(p, e.mode)
		}
		if err != nil {
			return nil, fmt.Errorf("crashfs: crash image: %w", err)
		}
	}
	return img, nil
}

// image lists the durable tree under d (named name) into out, parents
// first. Callers hold f.mu.
func (f *FS) image(d *node, name string, tear Tear, img *Image, out *[]imgEntry) {
	names := make([]string, 0, len(d.dur))
	for k := range d.dur {
		names = append(names, k)
	}
	sort.Strings(names)
	for k := range d.cur {
		if d.dur[k] == nil {
			img.Lost++
			if len(img.LostNames) < 20 {
				img.LostNames = append(img.LostNames, path.Join(name, k))
			}
		}
	}
	for _, k := range names {
		n := d.dur[k]
		if d.cur[k] != n {
			img.Revived++
		}
		full := path.Join(name, k)
		if n.dir {
			img.Dirs++
			*out = append(*out, imgEntry{name: full, dir: true})
			f.image(n, full, tear, img, out)
			continue
		}
		img.Files++
		keep := n.synced
		t := tear
		if t == TearMixed {
			t = Tear(f.rng.IntN(3))
		}
		switch rest := len(n.data) - n.synced; {
		case rest == 0:
		case t == TearKeep:
			keep = len(n.data)
		case t == TearPrefix:
			keep += f.rng.IntN(rest + 1)
		}
		if keep < len(n.data) {
			img.Torn++
		}
		*out = append(*out, imgEntry{name: full, data: n.data[:keep:keep], mode: n.mode})
	}
}

// Check compares the model's current tree with the wrapped storage's
// (hidden temp names aside, which the model cannot know): an error lists
// every difference. Call it while nothing else uses f.
func (f *FS) Check(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var diffs []string
	diffs = append(diffs, f.diverged...)
	if err := f.check(ctx, f.root, "", &diffs); err != nil {
		return fmt.Errorf("crashfs: check: %w", err)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("crashfs: the model differs from the storage: %s", strings.Join(diffs, "; "))
	}
	return nil
}

func (f *FS) check(ctx context.Context, d *node, dir string, diffs *[]string) error {
	entries, err := f.inner.List(ctx, dir)
	if err != nil && !errors.Is(err, fsys.ErrNotExist) {
		return err
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if fsys.IsTemp(e.Name) || e.Link || e.Special {
			continue
		}
		seen[e.Name] = true
		name := path.Join(dir, e.Name)
		n := d.cur[e.Name]
		switch {
		case n == nil:
			*diffs = append(*diffs, name+" exists, not in the model")
		case n.dir != e.Dir:
			*diffs = append(*diffs, name+": file and directory mixed up")
		case n.dir:
			if err := f.check(ctx, n, name, diffs); err != nil {
				return err
			}
		case int64(len(n.data)) != e.Size:
			*diffs = append(*diffs, fmt.Sprintf("%s: %d bytes, the model has %d", name, e.Size, len(n.data)))
		}
	}
	for k := range d.cur {
		if !seen[k] && !fsys.IsTemp(k) {
			*diffs = append(*diffs, path.Join(dir, k)+" is in the model, not in the storage")
		}
	}
	return nil
}

var (
	_ fsys.FS         = (*FS)(nil)
	_ fsys.Relaxed    = (*FS)(nil)
	_ fsys.Marker     = (*FS)(nil)
	_ fsys.PairStater = (*FS)(nil)
	_ fsys.DataSyncer = (*syncWriter)(nil)
)
