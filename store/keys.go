package store

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxKeyLen bounds one key component (most file systems allow 255 bytes).
const maxKeyLen = 255

// maxKeys bounds the depth of a profile.
const maxKeys = 32

// maxPathLen bounds a profile's whole path ("a/b/c"), so that every file
// of it stays well under the file system's PATH_MAX (4096 on Linux).
const maxPathLen = 1024

// reservedKeyRe matches keys that collide with the names the layout
// itself uses inside a profile or a version: version directories (any
// case, so case-insensitive file systems cannot confuse them), numbered
// data files, the manifest and its lock.
var reservedKeyRe = regexp.MustCompile(`(?i)^(v\d+|\d+\.(parquet|csv)|manifest\.json(\.write_lock)?)$`)

// ParseKeys splits a profile path such as "sales/orders" into keys and
// validates them. Several keys may each hold slashes: ("sales/orders") and
// ("sales", "orders") name the same profile, as in pyrosome.
func ParseKeys(parts ...string) ([]string, error) {
	var keys []string
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%w: empty key", ErrInvalidKey)
		}
		keys = append(keys, strings.Split(p, "/")...)
	}
	if err := ValidateKeys(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// ValidateKeys checks keys that are already split into components. A key
// must be non-empty valid UTF-8 without control characters (C0, DEL, C1),
// bidirectional text controls or other invisible characters (isInvisible;
// a zero width joiner only inside an emoji sequence), without white space
// at either end, not "." or "..", not start with "." (hidden names belong
// to the store), hold no "/", "\", NUL or "=" ("=" marks hive partition
// directories), and not be a name the layout uses itself: "vN" (a version
// directory), "N.parquet"/"N.csv" (a data file), "manifest.json" or
// "manifest.json.write_lock".
func ValidateKeys(keys []string) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: at least one key is required", ErrInvalidKey)
	}
	if len(keys) > maxKeys {
		return fmt.Errorf("%w: more than %d keys", ErrInvalidKey, maxKeys)
	}
	n := len(keys) - 1
	for _, k := range keys {
		if err := validateKey(k); err != nil {
			return err
		}
		n += len(k)
	}
	if n > maxPathLen {
		return fmt.Errorf("%w: the profile's path is %d bytes long, more than %d", ErrInvalidKey, n, maxPathLen)
	}
	return nil
}

func validateKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case k == "." || k == "..":
		return fmt.Errorf("%w: key %q resolves outside the data directory", ErrInvalidKey, k)
	case len(k) > maxKeyLen:
		return fmt.Errorf("%w: key longer than %d bytes", ErrInvalidKey, maxKeyLen)
	case !utf8.ValidString(k):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrInvalidKey)
	}
	for i, r := range k {
		switch {
		case r == '/' || r == '\\':
			return fmt.Errorf("%w: key %q contains a path separator", ErrInvalidKey, k)
		case r == 0:
			return fmt.Errorf("%w: key contains NUL", ErrInvalidKey)
		case r == utf8.RuneError:
			// What invalid UTF-8 and lone surrogates (JSON "\ud800")
			// decode to: two different names the client sent would become
			// this one.
			return fmt.Errorf("%w: key %q contains U+FFFD (invalid UTF-8 or an unpaired surrogate escape becomes it)", ErrInvalidKey, k)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			return fmt.Errorf("%w: key %q contains a control character", ErrInvalidKey, k)
		case isBidiControl(r):
			return fmt.Errorf("%w: key %q contains a bidirectional text control (U+%04X), which makes a name display as another", ErrInvalidKey, k, r)
		case isInvisible(r) && !(r == zeroWidthJoiner && joinsEmoji(k, i)) && !presentsSymbol(k, i, r):
			return fmt.Errorf("%w: key %q contains the invisible character %s, which makes a name display as another", ErrInvalidKey, k, strings.Trim(strconv.QuoteRuneToASCII(r), "'"))
		case r == '=':
			return fmt.Errorf("%w: key %q contains '=' (it marks partition directories)", ErrInvalidKey, k)
		case r == brailleBlank || r != ' ' && unicode.IsSpace(r) && i > 0 && i+utf8.RuneLen(r) < len(k):
			// A no-break, ideographic or other space displays as the
			// space (red team round 29's m04); at either end, white
			// space is refused below.
			return fmt.Errorf("%w: key %q contains the blank %s, which displays as a space: use the space U+0020", ErrInvalidKey, k, strings.Trim(strconv.QuoteRuneToASCII(r), "'"))
		}
	}
	if !norm.NFC.IsNormalString(k) {
		// "café" written with a combining accent (NFD, as macOS file
		// names) would be a second profile listed as the first (m04).
		return fmt.Errorf("%w: key %q is not in Unicode normalization form C (a letter and a combining mark where one composed character exists); send it composed: %q", ErrInvalidKey, k, norm.NFC.String(k))
	}
	first, _ := utf8.DecodeRuneInString(k)
	last, _ := utf8.DecodeLastRuneInString(k)
	switch {
	case unicode.IsSpace(first) || unicode.IsSpace(last):
		return fmt.Errorf("%w: key %q starts or ends with white space", ErrInvalidKey, k)
	case strings.HasPrefix(k, "."):
		return fmt.Errorf("%w: key %q starts with '.' (hidden names belong to the store)", ErrInvalidKey, k)
	case reservedKeyRe.MatchString(k):
		return fmt.Errorf("%w: key %q is a name the storage layout uses itself (version directories vN, data files N.parquet, manifest.json, its lock); choose another name", ErrInvalidKey, k)
	}
	return nil
}

// brailleBlank is the Braille pattern without dots, which displays as a
// space.
const brailleBlank = 0x2800

// isBidiControl reports the invisible characters that reorder the display
// of text around them: marks, embeddings, overrides and isolates.
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// isInvisible reports the characters that display as nothing, or as a
// line break, in a listing (red team round 24's y03): the format
// characters (Unicode category Cf: the bidirectional controls, soft
// hyphen U+00AD, the zero width space, non-joiner and joiner U+200B-U+200D,
// the word joiner U+2060, the byte order mark U+FEFF, tag characters…),
// the line and paragraph separators (Zl U+2028, Zp U+2029), and the rest
// of Unicode's default-ignorable code points (red team round 28's l04):
// the variation selectors (U+180B-U+180D, U+180F, U+FE00-U+FE0F,
// U+E0100-U+E01EF) and Other_Default_Ignorable_Code_Point (the combining
// grapheme joiner U+034F, the Hangul fillers U+115F, U+1160, U+3164,
// U+FFA0, …).
func isInvisible(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// presentsSymbol reports whether r, at byte i of k, is the text or emoji
// presentation selector (U+FE0E, U+FE0F) of the symbol before it, as in
// ❤️ (U+2764 U+FE0F), or of a keycap (1️⃣: a digit, U+FE0F, U+20E3): it
// changes how a visible character is drawn, and is kept.
func presentsSymbol(k string, i int, r rune) bool {
	if r != 0xfe0e && r != 0xfe0f {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(k[:i])
	next, _ := utf8.DecodeRuneInString(k[i+utf8.RuneLen(r):])
	return i > 0 && (unicode.Is(unicode.So, prev) || next == 0x20e3)
}

// zeroWidthJoiner is U+200D, which joins emoji into one (👩‍💻).
const zeroWidthJoiner = '\u200d'

// joinsEmoji reports whether the zero width joiner at byte i of k stands
// inside an emoji sequence: between two symbols (category So), the first
// possibly followed by a variation selector or skin tone modifier. There it
// draws one emoji from two, which is visible; anywhere else it is not.
func joinsEmoji(k string, i int) bool {
	before := k[:i]
	for {
		r, n := utf8.DecodeLastRuneInString(before)
		if r != 0xfe0f && (r < 0x1f3fb || r > 0x1f3ff) {
			break
		}
		before = before[:len(before)-n]
	}
	after := k[i+utf8.RuneLen(zeroWidthJoiner):]
	if before == "" || after == "" {
		return false // (an empty string decodes as U+FFFD, a symbol)
	}
	prev, _ := utf8.DecodeLastRuneInString(before)
	next, _ := utf8.DecodeRuneInString(after)
	return unicode.Is(unicode.So, prev) && unicode.Is(unicode.So, next)
}

// ProfilePath is the canonical slash-joined name of a profile, used in
// messages, tickets and commit records.
func ProfilePath(keys []string) string { return strings.Join(keys, "/") }
