package fsys

import "strings"

// TempSuffix ends the name of every hidden in-progress write (FS.Create
// before Commit); such names also start with ".". Sweepers delete stale
// ones by that pattern.
const TempSuffix = ".tmp"

// ValidName reports whether name is a name every FS accepts: non-empty,
// slash-separated, relative, clean (no "", "." or ".." element, no leading
// or trailing slash, no "//") and free of NUL and backslash. Implementations
// refuse any other name with ErrUnsafePath before touching storage.
func ValidName(name string) bool {
	if name == "" || name[0] == '/' || name[len(name)-1] == '/' {
		return false
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '/' {
			switch name[start:i] {
			case "", ".", "..":
				return false
			}
			start = i + 1
			continue
		}
		if c := name[i]; c == 0 || c == '\\' {
			return false
		}
	}
	return true
}

// IsTemp reports whether base (the last element of a name, as List
// returns it) names a hidden in-progress write: it starts with "." and ends
// in TempSuffix.
func IsTemp(base string) bool {
	return len(base) > len(TempSuffix) && base[0] == '.' && strings.HasSuffix(base, TempSuffix)
}
