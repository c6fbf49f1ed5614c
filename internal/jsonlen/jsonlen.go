package jsonlen

import "unicode/utf8"

// String is the length of s as encoding/json (json.Marshal, HTML escaping
// on) writes it as a JSON string, quotes included: \", \\, \b, \f, \n, \r
// and \t take two bytes; other control characters, <, > and & six
// (\u00XX); each byte of invalid UTF-8 six (\ufffd); U+2028 and U+2029
// six; any other character its UTF-8 bytes.
func String(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch b {
			case '"', '\\', '\b', '\f', '\n', '\r', '\t':
				n += 2
			case '<', '>', '&':
				n += 6
			default:
				if b < 0x20 {
					n += 6
				} else {
					n++
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
