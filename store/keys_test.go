package store

import (
	"errors"
	"strings"
	"testing"
)

// TestInvisibleKeyCharacters: a key holding a character that displays as
// nothing (Unicode format characters, category Cf, and the line and
// paragraph separators) is refused, naming the key and the character as
// a \u escape, since it would make two names look the same in a listing
// (red team round 24's y03: eight profiles that all looked like
// sales/orders). A zero width joiner inside an emoji sequence draws one
// emoji and is kept; ordinary non-ASCII names and the names pyrosome
// writes pass.
func TestInvisibleKeyCharacters(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want string // "" when valid; else the escape the error must name
	}{
		{"or\u200bders", `\u200b`},         // zero width space
		{"or\u200cders", `\u200c`},         // zero width non-joiner
		{"or\u200dders", `\u200d`},         // zero width joiner between letters
		{"or\u2060ders", `\u2060`},         // word joiner
		{"or\ufeffders", `\ufeff`},         // byte order mark
		{"or\u00adders", `\u00ad`},         // soft hyphen
		{"or\u2028ders", `\u2028`},         // line separator (Zl)
		{"or\u2029ders", `\u2029`},         // paragraph separator (Zp)
		{"or\u180eders", `\u180e`},         // Mongolian vowel separator (Cf)
		{"or\u2062ders", `\u2062`},         // invisible times (Cf)
		{"orders\U000e0041", `\U000e0041`}, // tag character (Cf)
		{"\u200d\U0001F4BB", `\u200d`},     // a joiner with no emoji before it
		{"\U0001F469\u200d", `\u200d`},     // nor after it
		{"\U0001F469\u200dx", `\u200d`},    // nor a letter after it
		{"orders", ""},
		{"sales_orders-2024.v2", ""},
		{"caf\u00e9", ""},
		{"\u5317\u4eac", ""},
		{"\U0001F680", ""},
		{"\U0001F469\u200D\U0001F4BB", ""},           // woman technologist
		{"\U0001F469\U0001F3FD\u200D\U0001F4BB", ""}, // with a skin tone
		{"\u2764\ufe0f\u200d\U0001F525", ""},         // heart on fire (with VS16)
		{"\u2764\ufe0f", ""},                         // red heart, emoji presentation
		{"1\ufe0f\u20e3", ""},                        // keycap one
		{"sales\u034f", `\u034f`},                    // combining grapheme joiner (red team round 28's l04)
		{"orders\ufe00", `\ufe00`},                   // a variation selector after a letter
		{"orders\ufe0f", `\ufe0f`},                   // the emoji one after a letter
		{"\ufe0f", `\ufe0f`},                         // alone
		{"orders\U000E0100", `\U000e0100`},           // a supplementary variation selector
		{"orders\u180b", `\u180b`},                   // a Mongolian free variation selector
		{"\u3164", `\u3164`},                         // the Hangul filler
		{"\uffa0", `\uffa0`},                         // the halfwidth Hangul filler
		{"a\u115fb", `\u115f`},                       // the Hangul choseong filler
		{"two words", ""},
	} {
		err := ValidateKeys([]string{"sales", tc.key})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q refused: %v", tc.key, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), "invisible character "+tc.want) {
			t.Errorf("%q: %v, want ErrInvalidKey naming %s", tc.key, err, tc.want)
		}
	}
}

// TestLookalikeKeys: keys that would list as another are refused, naming
// what to send instead (red team round 29's m04): a decomposed letter
// (NFD "café", Hangul jamo) is not the composed one, a no-break,
// ideographic or Braille blank is not the space.
func TestLookalikeKeys(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"cafe\u0301", "normalization form C"},
		{"\u1112\u1161\u11ab", "normalization form C"},
		{"a\u00a0b", `blank \u00a0`},
		{"x\u2800y", `blank \u2800`},
		{"x\u2800", `blank \u2800`},
		{"x\u3000y", `blank \u3000`},
		{"caf\u00e9", ""},
		{"\ud55c", ""},
		{"a b", ""},
	} {
		err := ValidateKeys([]string{"k", tc.key})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q refused: %v", tc.key, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidKey) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want ErrInvalidKey saying %s", tc.key, err, tc.want)
		}
	}
}
