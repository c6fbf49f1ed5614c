package store

import (
	"fmt"

	"github.com/quiverdb/quiver/store/codec"
	"github.com/quiverdb/quiver/store/fsys"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Names of the files and directories the format defines (docs/format.md).
const (
	manifestName    = "manifest.json"
	lockName        = "manifest.json.write_lock"
	versionInfoName = ".version.json"
	logDir          = ".log"
	kindName        = ".quiver.kind"
	claimSuffix     = ".claim"
	legacyCommitSfx = ".commit.json"
	tempSuffix      = ".tmp"
	segmentExt      = ".ndjson"
	// legacyRequestsDir held request records before the commit log; it is
	// still recognised (and left alone) in old data directories.
	legacyRequestsDir = ".requests"
)

// Kinds a directory can be marked with (kindName).
const (
	kindProfile = "profile"
	kindParent  = "parent"
)

// Format is the file format of a profile's data files.
type Format = codec.Format

// The formats a profile can hold; one per profile.
const (
	FormatParquet = codec.FormatParquet
	FormatCSV     = codec.FormatCSV
)

func parseFormat(s string) (Format, error) { return codec.ParseFormat(s) }

var (
	versionDirRe = regexp.MustCompile(`^v(0|[1-9]\d{0,8})$`)
	dataFileRe   = regexp.MustCompile(`^(0|[1-9]\d{0,8})\.(parquet|csv)$`)
	claimRe      = regexp.MustCompile(`^\.(0|[1-9]\d{0,8})\.(parquet|csv)\.claim$`)
	legacyRecRe  = regexp.MustCompile(`^\.(0|[1-9]\d{0,8})\.commit\.json$`)
	segmentRe    = regexp.MustCompile(`^(\d{20})\.ndjson$`)
)

// VersionName is the directory name of version n ("v3").
func VersionName(n int) string { return "v" + strconv.Itoa(n) }

// ParseVersion accepts "v3" or "3".
func ParseVersion(s string) (int, error) {
	t := strings.TrimPrefix(s, "v")
	n, ok := parseVersionDir("v" + t)
	if !ok || t == "" {
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

// versionDirs lists the versions whose directories a profile directory's
// entries hold (real directories named vN, not links), in listing order.
func versionDirs(entries []fsys.Entry) []int {
	var out []int
	for _, e := range entries {
		if v, ok := parseVersionDir(e.Name); ok && e.Dir && !e.Link {
			out = append(out, v)
		}
	}
	return out
}

// csvClaimMark is what the claim of a Quiver CSV append holds
// (.<i>.csv.claim): pyrosome's claims are empty files, and Quiver's CSV
// files have no footer to say who wrote them (Parquet's carry
// quiver.schema_version), so a numbered CSV file no record lists is an
// orphan, not pyrosome's data, when its index's claim holds anything
// (claimMarked). The claim is durable before the file gets its name.
var csvClaimMark = []byte("quiver\n")

// claimMarked reports whether e, an entry of a version's root, is the
// marked claim of a Quiver CSV append, and its index. Only the size is
// looked at: pyrosome never writes into a claim, and a listing has it.
func claimMarked(e fsys.Entry) (int, bool) {
	if e.Size == 0 || e.Dir || e.Link || e.Special || !strings.HasSuffix(e.Name, ".csv"+claimSuffix) {
		return 0, false
	}
	return parseIndexed(claimRe, e.Name)
}

func dataFileName(i int, f Format) string { return strconv.Itoa(i) + "." + f.Ext() }
func claimName(i int, f Format) string    { return "." + strconv.Itoa(i) + "." + f.Ext() + claimSuffix }
func legacyRecordName(i int) string       { return "." + strconv.Itoa(i) + legacyCommitSfx }
func segmentName(first int64) string      { return fmt.Sprintf("%020d%s", first, segmentExt) }

// parseDataFile returns the index and format of a numbered data file name.
// parseDataFile parses a data file's name as dataFileRe matches it
// (without the regexp: the loader parses every file of every record on
// each read of a version).
func parseDataFile(name string) (int, Format, bool) {
	num, ext, ok := strings.Cut(name, ".")
	if !ok || num == "" || len(num) > 9 || (num[0] == '0' && len(num) > 1) {
		return 0, "", false
	}
	n := 0
	for i := 0; i < len(num); i++ {
		c := num[i]
		if c < '0' || c > '9' {
			return 0, "", false
		}
		n = n*10 + int(c-'0')
	}
	switch ext {
	case "parquet":
		return n, FormatParquet, true
	case "csv":
		return n, FormatCSV, true
	}
	return 0, "", false
}

func parseIndexed(re *regexp.Regexp, name string) (int, bool) {
	m := re.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

func parseSegmentName(name string) (int64, bool) {
	m := segmentRe.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	return n, err == nil && n > 0
}

// isTempName reports whether a name is a hidden temp file (ours or
// pyrosome's: ".<random><suffix>.tmp").
func isTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, tempSuffix)
}

func sortedInts(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// Mode says what a commit did.
type Mode string

// Commit modes.
const (
	// ModeAppend adds files to the latest version.
	ModeAppend Mode = "append"
	// ModeWrite starts a new version.
	ModeWrite Mode = "write"
	// ModeRetire records that retention removed a version (never a put's
	// mode).
	ModeRetire Mode = "retire"
)

type regexpT = regexp.Regexp

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }
