package store

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Names of the files the format defines.
const (
	manifestName     = "manifest.json"
	lockName         = "manifest.json.write_lock"
	versionInfoName  = ".version.json"
	commitSuffix     = ".commit.json"
	claimSuffix      = ".claim"
	hiveDefaultValue = "__HIVE_DEFAULT_PARTITION__"
)

// Format is the file format of a profile's data files.
type Format string

// The formats a profile can hold; one per profile.
const (
	FormatParquet Format = "parquet"
	FormatCSV     Format = "csv"
)

// ext is the data file extension without the dot.
func (f Format) ext() string { return string(f) }

func parseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "", "parquet":
		return FormatParquet, nil
	case "csv":
		return FormatCSV, nil
	}
	return "", fmt.Errorf("%w: unknown format %q (want parquet or csv)", ErrInvalidArgument, s)
}

var (
	versionDirRe = regexp.MustCompile(`^v(\d+)$`)
	dataFileRe   = regexp.MustCompile(`^(\d+)\.(parquet|csv)$`)
	claimRe      = regexp.MustCompile(`^\.(\d+)\.(parquet|csv)\.claim$`)
	commitRe     = regexp.MustCompile(`^\.(\d+)\.commit\.json$`)
)

// VersionName is the directory name of version n ("v3").
func VersionName(n int) string { return "v" + strconv.Itoa(n) }

// ParseVersion accepts "v3" or "3".
func ParseVersion(s string) (int, error) {
	t := strings.TrimPrefix(s, "v")
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 || t == "" || (len(t) > 1 && t[0] == '0') {
		return 0, fmt.Errorf("%w: bad version %q (want v<N> or N)", ErrInvalidArgument, s)
	}
	return n, nil
}

func parseVersionDir(name string) (int, bool) {
	m := versionDirRe.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

func dataFileName(i int, f Format) string { return strconv.Itoa(i) + "." + f.ext() }
func claimName(i int, f Format) string    { return "." + strconv.Itoa(i) + "." + f.ext() + claimSuffix }
func commitName(i int) string             { return "." + strconv.Itoa(i) + commitSuffix }

// parseDataFile returns the index and format of a numbered data file name.
func parseDataFile(name string) (int, Format, bool) {
	m := dataFileRe.FindStringSubmatch(name)
	if m == nil {
		return 0, "", false
	}
	n, err := strconv.Atoi(m[1])
	return n, Format(m[2]), err == nil
}

func parseIndexed(re *regexp.Regexp, name string) (int, bool) {
	m := re.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// versionDirs lists the vN directories of a profile, ascending.
func versionDirs(entries []fs.DirEntry) []int {
	var vs []int
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if n, ok := parseVersionDir(e.Name()); ok {
			vs = append(vs, n)
		}
	}
	sort.Ints(vs)
	return vs
}

// Mode says whether a put starts a new version or appends to the latest.
type Mode string

// Put modes.
const (
	ModeAppend Mode = "append"
	ModeWrite  Mode = "write"
)

// uncommittedWrite reports whether a version directory is a Quiver write
// that never committed: it has a .version.json but no .0.commit.json (a
// write publishes its record before the manifest names it, so such a
// directory was never a version, whatever files it holds).
func uncommittedWrite(entries []fs.DirEntry) bool {
	info, rec0 := false, false
	for _, e := range entries {
		switch e.Name() {
		case versionInfoName:
			info = true
		case commitName(0):
			rec0 = true
		}
	}
	return info && !rec0
}
