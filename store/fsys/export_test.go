package fsys

// NewLocalWalk is NewLocal resolving names one component at a time, as
// where openat2 is missing, so that tests cover that path on any kernel.
func NewLocalWalk(root string) (*Local, error) { return newLocal(root, false) }

// UsesOpenat2 reports whether l resolves names with openat2.
func (l *Local) UsesOpenat2() bool { return l.useOpenat2 }

// DisableMarkers makes l create markers as files, as where links fail.
func DisableMarkers(l *Local) {
	l.marker.mu.Lock()
	l.marker.disabled = true
	l.marker.mu.Unlock()
}

// FailWriter records err as w's (a Writer of Local) failed write or sync.
func FailWriter(w Writer, err error) { w.(*localWriter).err = err }
