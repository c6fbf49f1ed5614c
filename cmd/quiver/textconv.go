package main

// Reading CSV fields and NDJSON values as the column types of the profile
// an append goes to (red team round 13, e05). Inference types a file by
// itself, so whole numbers appended to a float64 column, or a column empty
// in every row, came out of another type than the profile's and the append
// was refused; an append of text to an existing profile is read with the
// profile's schema instead. Every value is parsed by its column's type,
// exactly: 1 is 1.0 in a float64 column, an empty field null in a nullable
// one, and a value the type cannot hold as written (a fraction in an
// integer, more decimal places than a decimal's scale, a timestamp finer
// than its unit, a wall-clock time without an offset in a column of a
// zone with summer time, …) is refused, naming it, never rounded,
// truncated or reinterpreted.
//
// Text is what `quiver get --format csv` writes (csvout.go), so that what
// it writes reads back: numbers as numbers, bool as true/false, dates as
// 2006-01-02, timestamps as 2006-01-02 15:04:05.999999999 with the offset
// when the type has a zone, binary as base64, lists as JSON arrays. In
// NDJSON (and in the JSON of a list) a number is a JSON number; a decimal
// is a number or a string; strings, binary (base64), dates, times and
// timestamps are JSON strings.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/quiverdb/quiver/store/codec"
)

// jsonForm is the JSON a type's values take.
type jsonForm int

const (
	jsonNone    jsonForm = iota // none: only null (text cannot give a value)
	jsonBool                    // true, false
	jsonInteger                 // a JSON number without fraction or exponent
	jsonFloat                   // a JSON number (in a CSV list also NaN, Infinity, -Infinity)
	jsonDecimal                 // a JSON number, or a string holding one
	jsonString                  // a JSON string
	jsonArray                   // a JSON array
)

// errNull is the error of a null where the type has no null.
var errNull = errors.New("null")

// valueConv reads the values of one type of a profile's schema from text
// (a CSV field, text) and from JSON (an NDJSON value, a list element).
type valueConv struct {
	typ       arrow.DataType // the profile's type
	build     arrow.DataType // the type the builder builds: typ with its dictionaries decoded
	nullable  bool           // null is a value of it
	form      jsonForm
	want      string                                // what a value is, for messages ("an integer")
	text      func(b array.Builder, v string) error // a value from its text (non-empty, or "" if emptyText); nil: none can be
	emptyText bool                                  // text takes "" (a quoted empty CSV field): strings, binary
	elem      *valueConv                            // a list's elements
	size      int                                   // a fixed-size list's length; -1 for others
}

// newValueConv is the reader of values of type dt (nullable: whether null
// is one). Dictionaries are built as their values and encoded afterwards
// (codec.ConformArray), so a dictionary type reads as its value type.
func newValueConv(dt arrow.DataType, nullable bool) *valueConv {
	c := &valueConv{typ: dt, build: dt, nullable: nullable, size: -1}
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		v := newValueConv(t.ValueType, nullable)
		v.typ = dt
		return v
	case *arrow.BooleanType:
		c.form, c.want, c.text = jsonBool, "true or false", boolText
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
		c.form, c.want, c.text = jsonInteger, "an integer", intText(dt)
	case *arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type:
		c.form, c.want, c.text = jsonInteger, "an integer", uintText(dt)
	case *arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type:
		c.form, c.want, c.text = jsonFloat, "a number", floatText(dt)
	case arrow.DecimalType:
		c.form, c.want, c.text = jsonDecimal, "a decimal number", decimalText(t)
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		c.form, c.want, c.text, c.emptyText = jsonString, "a string", stringText, true
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		c.form, c.want, c.text, c.emptyText = jsonString, "a string of base64", binaryText(-1), true
	case *arrow.FixedSizeBinaryType:
		c.form, c.want, c.text = jsonString, "a string of base64", binaryText(t.ByteWidth)
	case *arrow.Date32Type, *arrow.Date64Type:
		c.form, c.want, c.text = jsonString, "a string of a date (2006-01-02)", dateText(dt)
	case *arrow.TimestampType:
		c.form, c.want, c.text = jsonString, "a string of a timestamp (2006-01-02 15:04:05)", timestampText(t)
	case *arrow.Time32Type, *arrow.Time64Type:
		c.form, c.want, c.text = jsonString, "a string of a time of day (15:04:05)", timeText(dt)
	case *arrow.ListType:
		c.listOf(t.ElemField(), func(f arrow.Field) arrow.DataType { return arrow.ListOfField(f) })
	case *arrow.LargeListType:
		c.listOf(t.ElemField(), func(f arrow.Field) arrow.DataType { return arrow.LargeListOfField(f) })
	case *arrow.FixedSizeListType:
		c.listOf(t.ElemField(), func(f arrow.Field) arrow.DataType { return arrow.FixedSizeListOfField(t.Len(), f) })
		c.size = int(t.Len())
	case arrow.ExtensionType:
		// The extension's own text, as quiver get writes it (ValueStr).
		c.form, c.want = jsonString, "a string"
		c.text = func(b array.Builder, v string) error { return b.AppendValueFromString(v) }
	default:
		c.want = "null"
	}
	return c
}

// listOf makes c a list of elements of field f; of builds the list type
// of an element field.
func (c *valueConv) listOf(f arrow.Field, of func(arrow.Field) arrow.DataType) {
	c.elem = newValueConv(f.Type, f.Nullable)
	bf := f
	bf.Type = c.elem.build
	c.build = of(bf)
	c.form, c.want, c.text = jsonArray, "an array", c.listText
}

// cannot explains that no text gives a value of c's type.
func (c *valueConv) cannot() error {
	return fmt.Errorf("quiver put reads no value of type %s from text, only null (an empty field, JSON null); "+
		"put this column from Parquet or Arrow IPC", c.typ)
}

// appendJSON reads the JSON value at s into b. lenient takes NaN, Infinity
// and -Infinity in a float column (the JSON lists of CSV fields, as
// Python's json module writes them); NDJSON is strict JSON. A null where
// the type has none is errNull.
func (c *valueConv) appendJSON(b array.Builder, s *jsonScanner, lenient bool) error {
	if s.i >= len(s.b) {
		return s.syntax("a value")
	}
	rest := s.b[s.i:]
	switch ch := rest[0]; {
	case bytes.HasPrefix(rest, []byte("null")):
		s.i += 4
		if !c.nullable {
			return errNull
		}
		b.AppendNull()
		return nil
	case ch == '[':
		if c.form != jsonArray {
			return c.wrongJSON("an array")
		}
		return c.appendArray(b, s, lenient)
	case ch == '{':
		return c.wrongJSON("an object")
	case ch == '"':
		v, err := s.str()
		if err != nil {
			return err
		}
		if c.form != jsonString && c.form != jsonDecimal {
			return c.wrongJSON("a string")
		}
		return c.text(b, v)
	case bytes.HasPrefix(rest, []byte("true")), bytes.HasPrefix(rest, []byte("false")):
		v := ch == 't'
		s.i += 5
		if v {
			s.i--
		}
		if c.form != jsonBool {
			return c.wrongJSON("true or false")
		}
		b.(*array.BooleanBuilder).Append(v)
		return nil
	case lenient && c.form == jsonFloat && (ch == 'N' || ch == 'I' || ch == '-'):
		for _, w := range [...]struct{ json, text string }{{"NaN", "NaN"}, {"Infinity", "+Inf"}, {"-Infinity", "-Inf"}} {
			if bytes.HasPrefix(rest, []byte(w.json)) {
				s.i += len(w.json)
				return c.text(b, w.text)
			}
		}
	}
	if ch := rest[0]; ch == '-' || (ch >= '0' && ch <= '9') {
		v, err := s.number()
		if err != nil {
			return err
		}
		switch c.form {
		case jsonInteger, jsonFloat, jsonDecimal:
			return c.text(b, v.text)
		}
		return c.wrongJSON("a number")
	}
	return s.syntax("a value")
}

// wrongJSON explains a JSON value of another kind than c's.
func (c *valueConv) wrongJSON(got string) error {
	if c.form == jsonNone {
		return c.cannot()
	}
	return fmt.Errorf("%s where %s should be", got, c.want)
}

// appendArray reads the JSON array at s as a list.
func (c *valueConv) appendArray(b array.Builder, s *jsonScanner, lenient bool) error {
	lb, ok := b.(array.ListLikeBuilder)
	if !ok {
		return fmt.Errorf("cannot build %s", c.typ)
	}
	s.i++ // '['
	lb.Append(true)
	vb := lb.ValueBuilder()
	n := 0
	s.space()
	if !s.eat(']') {
		for {
			s.space()
			if err := c.elem.appendJSON(vb, s, lenient); err != nil {
				if errors.Is(err, errNull) {
					err = fmt.Errorf("null, but the type's elements are not nullable (%s)", c.typ)
				}
				return fmt.Errorf("element %d: %w", n+1, err)
			}
			n++
			s.space()
			if s.eat(']') {
				break
			}
			if !s.eat(',') {
				return s.syntax("',' or ']' after an element")
			}
		}
	}
	if c.size >= 0 && n != c.size {
		return fmt.Errorf("%d elements, but the type's lists hold %d", n, c.size)
	}
	return nil
}

// listText reads a CSV field that holds a list: a JSON array, as quiver
// get writes it.
func (c *valueConv) listText(b array.Builder, v string) error {
	if !utf8.ValidString(v) {
		return errors.New("not valid UTF-8")
	}
	s := jsonScanner{b: []byte(v)}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return errors.New("not a JSON array (a list is written as one: [1,null,3]; [] is the empty list, an empty field null)")
	}
	if err := c.appendJSON(b, &s, true); err != nil {
		return err
	}
	s.space()
	if s.i < len(s.b) {
		return errors.New("more after the JSON array" + s.otherSpace())
	}
	return nil
}

func boolText(b array.Builder, v string) error {
	switch {
	case strings.EqualFold(v, "true"):
		b.(*array.BooleanBuilder).Append(true)
	case strings.EqualFold(v, "false"):
		b.(*array.BooleanBuilder).Append(false)
	default:
		return errors.New("not true or false")
	}
	return nil
}

// intError explains an integer that strconv refused.
func intError(v string, err error, dt arrow.DataType) error {
	switch {
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("beyond the range of %s", dt)
	case codec.CSVValueFits(arrow.PrimitiveTypes.Float64, v):
		return errors.New("not an integer (a fraction or an exponent is not taken, nor rounded)")
	}
	return errors.New("not an integer")
}

func intText(dt arrow.DataType) func(array.Builder, string) error {
	bits := dt.(arrow.FixedWidthDataType).BitWidth()
	return func(b array.Builder, v string) error {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return intError(v, err, dt)
		}
		switch b := b.(type) {
		case *array.Int8Builder:
			b.Append(int8(n))
		case *array.Int16Builder:
			b.Append(int16(n))
		case *array.Int32Builder:
			b.Append(int32(n))
		case *array.Int64Builder:
			b.Append(n)
		}
		return nil
	}
}

func uintText(dt arrow.DataType) func(array.Builder, string) error {
	bits := dt.(arrow.FixedWidthDataType).BitWidth()
	return func(b array.Builder, v string) error {
		u := strings.TrimPrefix(v, "+")
		if neg, ok := strings.CutPrefix(u, "-"); ok && neg != "" && strings.Trim(neg, "0") == "" {
			u = neg // -0
		}
		n, err := strconv.ParseUint(u, 10, bits)
		if err != nil {
			if _, ierr := strconv.ParseInt(v, 10, 64); ierr == nil || errors.Is(ierr, strconv.ErrRange) {
				err = strconv.ErrRange // a negative integer
			}
			return intError(v, err, dt)
		}
		switch b := b.(type) {
		case *array.Uint8Builder:
			b.Append(uint8(n))
		case *array.Uint16Builder:
			b.Append(uint16(n))
		case *array.Uint32Builder:
			b.Append(uint32(n))
		case *array.Uint64Builder:
			b.Append(n)
		}
		return nil
	}
}

// floatText reads the numbers the CSV inference takes as float64 (integers
// too, and inf, infinity and nan in any case with a sign); a value beyond
// the type's range is refused, not made infinite.
func floatText(dt arrow.DataType) func(array.Builder, string) error {
	return func(b array.Builder, v string) error {
		if !codec.CSVValueFits(arrow.PrimitiveTypes.Float64, v) {
			return errors.New("not a number")
		}
		bits := 64
		if dt.ID() != arrow.FLOAT64 {
			bits = 32
		}
		var f float64
		var err error
		if len(v) == 4 && (v[0] == '+' || v[0] == '-') && strings.EqualFold(v[1:], "nan") {
			f = math.NaN()
		} else if f, err = strconv.ParseFloat(v, bits); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return fmt.Errorf("beyond the range of %s", dt)
			}
			return errors.New("not a number")
		}
		switch b := b.(type) {
		case *array.Float64Builder:
			b.Append(f)
		case *array.Float32Builder:
			b.Append(float32(f))
		case *array.Float16Builder:
			h := float16.New(float32(f))
			if math.IsInf(float64(h.Float32()), 0) && !math.IsInf(f, 0) {
				return fmt.Errorf("beyond the range of %s", dt)
			}
			b.Append(h)
		}
		return nil
	}
}

// maxExponent bounds the exponent of a decimal's text: far beyond any
// precision (76 digits), and small enough to count in an int.
const maxExponent = 1_000_000

// decimalDigits reads v, [-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?, as the
// digits of its unscaled value at scale (a decimal's value is the
// unscaled integer × 10^-scale) and whether it is negative. A value with
// more decimal places than scale (which would be rounded) or more digits
// than precision is refused. The work is linear in v: no power of ten is
// computed.
func decimalDigits(v string, precision, scale int32) (neg bool, digits string, err error) {
	s := v
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	mant, exp, hasExp := strings.Cut(strings.ReplaceAll(s, "E", "e"), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	if whole+frac == "" || !allDigitsStr(whole) || !allDigitsStr(frac) {
		return false, "", errors.New("not a decimal number")
	}
	e := 0
	if hasExp {
		es := strings.TrimPrefix(strings.TrimPrefix(exp, "+"), "-")
		if es == "" || !allDigitsStr(es) || len(exp)-len(es) > 1 {
			return false, "", errors.New("not a decimal number")
		}
		n, err := strconv.Atoi(es)
		if err != nil || n > maxExponent {
			return false, "", fmt.Errorf("an exponent beyond the precision %d", precision)
		}
		if exp[0] == '-' {
			n = -n
		}
		e = n
	}
	d := strings.TrimLeft(whole+frac, "0")
	e -= len(frac)
	end := len(d)
	for end > 0 && d[end-1] == '0' {
		end--
		e++
	}
	d = d[:end]
	if d == "" {
		return false, "0", nil
	}
	shift := e + int(scale) // unscaled = d × 10^shift
	if shift < 0 {
		return false, "", fmt.Errorf("more decimal places than the scale %d (it would be rounded)", scale)
	}
	if len(d)+shift > int(precision) {
		return false, "", fmt.Errorf("more digits than the precision %d", precision)
	}
	return neg, d + strings.Repeat("0", shift), nil
}

func allDigitsStr(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func decimalText(t arrow.DecimalType) func(array.Builder, string) error {
	precision, scale := t.GetPrecision(), t.GetScale()
	return func(b array.Builder, v string) error {
		neg, digits, err := decimalDigits(v, precision, scale)
		if err != nil {
			return err
		}
		var n *big.Int
		if _, small := b.(*array.Decimal32Builder); !small {
			if _, small = b.(*array.Decimal64Builder); !small {
				var ok bool
				if n, ok = new(big.Int).SetString(digits, 10); !ok {
					return errors.New("not a decimal number")
				}
				if neg {
					n.Neg(n)
				}
			}
		}
		switch b := b.(type) {
		case *array.Decimal32Builder:
			u, err := strconv.ParseInt(digits, 10, 32) // at most 9 digits
			if err != nil {
				return fmt.Errorf("beyond the range of %s", t)
			}
			if neg {
				u = -u
			}
			b.Append(decimal.Decimal32(u))
		case *array.Decimal64Builder:
			u, err := strconv.ParseInt(digits, 10, 64) // at most 18 digits
			if err != nil {
				return fmt.Errorf("beyond the range of %s", t)
			}
			if neg {
				u = -u
			}
			b.Append(decimal.Decimal64(u))
		case *array.Decimal128Builder:
			if n.BitLen() > 127 { // a precision beyond 38
				return fmt.Errorf("beyond the range of %s", t)
			}
			b.Append(decimal128.FromBigInt(n))
		case *array.Decimal256Builder:
			if n.BitLen() > 255 {
				return fmt.Errorf("beyond the range of %s", t)
			}
			b.Append(decimal256.FromBigInt(n))
		}
		return nil
	}
}

func stringText(b array.Builder, v string) error {
	if !utf8.ValidString(v) {
		return errors.New("not valid UTF-8")
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(v)
	case *array.LargeStringBuilder:
		b.Append(v)
	case *array.StringViewBuilder:
		b.Append(v)
	}
	return nil
}

// binaryText reads base64 (RFC 4648 with padding, as quiver get writes
// binary values); width is a fixed-size binary's (-1: any length).
func binaryText(width int) func(array.Builder, string) error {
	return func(b array.Builder, v string) error {
		if strings.ContainsAny(v, "\r\n") { // which the decoder would skip
			return errors.New("not base64 (a line end in it)")
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(v)
		if err != nil {
			return errors.New("not base64 (binary values are written in base64, with padding)")
		}
		switch b := b.(type) {
		case *array.BinaryBuilder:
			b.Append(raw)
		case *array.BinaryViewBuilder:
			b.Append(raw)
		case *array.FixedSizeBinaryBuilder:
			if len(raw) != width {
				return fmt.Errorf("%d bytes, but the type's values hold %d", len(raw), width)
			}
			b.Append(raw)
		}
		return nil
	}
}

// twoDigits reads s[i:i+2] as a number.
func twoDigits(s string, i int) (int, bool) {
	if i+2 > len(s) || s[i] < '0' || s[i] > '9' || s[i+1] < '0' || s[i+1] > '9' {
		return 0, false
	}
	return int(s[i]-'0')*10 + int(s[i+1]-'0'), true
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (Howard Hinnant's algorithm).
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := int64((153*mp+2)/5 + d - 1)
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func daysIn(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// parseDate reads [-]YYYY-MM-DD (four or more digits of year, as Go and so
// quiver get write years outside 0…9999) as days from 1970-01-01.
// yearDigits, when positive, is the exact number of year digits wanted.
func parseDate(v string, yearDigits int) (int64, error) {
	bad := errors.New("not a date (2006-01-02)")
	s, neg := v, false
	if yearDigits <= 0 && strings.HasPrefix(s, "-") {
		s, neg = s[1:], true
	}
	i := strings.IndexByte(s, '-')
	if i < 4 || i > 9 || (yearDigits > 0 && i != yearDigits) || !allDigitsStr(s[:i]) || len(s) != i+6 || s[i+3] != '-' {
		return 0, bad
	}
	y, _ := strconv.ParseInt(s[:i], 10, 64)
	if neg {
		y = -y
	}
	m, ok1 := twoDigits(s, i+1)
	d, ok2 := twoDigits(s, i+4)
	if !ok1 || !ok2 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, errors.New("not a valid date (2006-01-02, a month 01–12 and a day of that month)")
	}
	return daysFromCivil(y, m, d), nil
}

func dateText(dt arrow.DataType) func(array.Builder, string) error {
	return func(b array.Builder, v string) error {
		days, err := parseDate(v, 0)
		if err != nil {
			return err
		}
		switch b := b.(type) {
		case *array.Date32Builder:
			if days < math.MinInt32 || days > math.MaxInt32 {
				return fmt.Errorf("beyond the range of %s", dt)
			}
			b.Append(arrow.Date32(days))
		case *array.Date64Builder:
			const msPerDay = 86_400_000
			if days < math.MinInt64/msPerDay || days > math.MaxInt64/msPerDay {
				return fmt.Errorf("beyond the range of %s", dt)
			}
			b.Append(arrow.Date64(days * msPerDay))
		}
		return nil
	}
}

// parseClock reads HH:MM[:SS[.fraction]] at the start of s: the seconds of
// the day, the nanoseconds, how many fraction digits were given, and the
// rest of s.
func parseClock(s string) (sec int64, nanos int64, digits int, rest string, err error) {
	bad := errors.New("not a time of day (15:04:05, with at most 9 digits of fraction)")
	h, ok1 := twoDigits(s, 0)
	m, ok2 := twoDigits(s, 3)
	if !ok1 || !ok2 || s[2] != ':' {
		return 0, 0, 0, "", bad
	}
	sc, i := 0, 5
	if i < len(s) && s[i] == ':' {
		var ok bool
		if sc, ok = twoDigits(s, i+1); !ok {
			return 0, 0, 0, "", bad
		}
		i += 3
		if i < len(s) && s[i] == '.' {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			digits = j - i - 1
			if digits == 0 || digits > 9 {
				return 0, 0, 0, "", bad
			}
			frac, _ := strconv.ParseInt(s[i+1:j]+strings.Repeat("0", 9-digits), 10, 64)
			nanos, i = frac, j
		}
	}
	if h > 23 || m > 59 || sc > 59 {
		return 0, 0, 0, "", errors.New("not a valid time of day (hours 00–23, minutes and seconds 00–59)")
	}
	return int64(h*3600 + m*60 + sc), nanos, digits, s[i:], nil
}

// unitNanos is the nanoseconds of one unit.
func unitNanos(u arrow.TimeUnit) int64 {
	return int64(u.Multiplier())
}

// inUnit is sec seconds and nanos nanoseconds in unit u; an error if the
// nanoseconds are finer than u (they would be cut) or the value beyond
// int64.
func inUnit(sec, nanos int64, u arrow.TimeUnit, dt arrow.DataType) (int64, error) {
	per := unitNanos(u)
	if nanos%per != 0 {
		return 0, fmt.Errorf("finer than the unit of %s (it would be cut)", dt)
	}
	perSec := int64(time.Second) / per
	if sec > math.MaxInt64/perSec || sec < math.MinInt64/perSec {
		return 0, fmt.Errorf("beyond the range of %s", dt)
	}
	v, f := sec*perSec, nanos/per
	if v > math.MaxInt64-f {
		return 0, fmt.Errorf("beyond the range of %s", dt)
	}
	return v + f, nil
}

func timeText(dt arrow.DataType) func(array.Builder, string) error {
	return func(b array.Builder, v string) error {
		sec, nanos, _, rest, err := parseClock(v)
		if err != nil {
			return err
		}
		if rest != "" {
			return errors.New("not a time of day (15:04:05, with at most 9 digits of fraction)")
		}
		switch b := b.(type) {
		case *array.Time32Builder:
			n, err := inUnit(sec, nanos, dt.(*arrow.Time32Type).Unit, dt)
			if err != nil {
				return err
			}
			b.Append(arrow.Time32(n))
		case *array.Time64Builder:
			n, err := inUnit(sec, nanos, dt.(*arrow.Time64Type).Unit, dt)
			if err != nil {
				return err
			}
			b.Append(arrow.Time64(n))
		}
		return nil
	}
}

// zoneRule is how a timestamp type takes a value without an offset.
type zoneRule struct {
	naive  bool   // no time zone: wall-clock values, which take no offset
	fixed  bool   // UTC or a fixed offset: a value without one is in it
	offset int64  // the fixed offset, in seconds east of UTC
	loc    string // the zone's name, for messages
}

func zoneOf(t *arrow.TimestampType) zoneRule {
	z := zoneRule{naive: t.TimeZone == "", loc: t.TimeZone}
	if z.naive {
		return z
	}
	if strings.EqualFold(t.TimeZone, "utc") {
		z.fixed = true
		return z
	}
	if off, ok := parseOffset(t.TimeZone); ok && len(t.TimeZone) == 6 {
		z.fixed, z.offset = true, off
	}
	return z
}

// parseOffset reads a UTC offset: Z, ±HH:MM, ±HHMM, ±HH or ±HH:MM:SS.
func parseOffset(s string) (int64, bool) {
	if s == "Z" || s == "z" {
		return 0, true
	}
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') {
		return 0, false
	}
	h, ok := twoDigits(s, 1)
	if !ok {
		return 0, false
	}
	m, sec := 0, 0
	switch r := s[3:]; {
	case r == "":
	case len(r) == 3 && r[0] == ':':
		m, ok = twoDigits(r, 1)
	case len(r) == 2:
		m, ok = twoDigits(r, 0)
	case len(r) == 6 && r[0] == ':' && r[3] == ':':
		m, ok = twoDigits(r, 1)
		if ok {
			sec, ok = twoDigits(r, 4)
		}
	default:
		return 0, false
	}
	if !ok || h > 23 || m > 59 || sec > 59 {
		return 0, false
	}
	off := int64(h*3600 + m*60 + sec)
	if s[0] == '-' {
		off = -off
	}
	return off, true
}

const timestampForm = "2006-01-02 15:04:05.999999999"

func timestampText(t *arrow.TimestampType) func(array.Builder, string) error {
	zone := zoneOf(t)
	return func(b array.Builder, v string) error {
		n, err := parseTimestamp(v, t, zone)
		if err != nil {
			return err
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(n))
		return nil
	}
}

// parseTimestamp reads a timestamp of type t: 2006-01-02, then optionally
// a time of day after a space or T, then optionally a UTC offset (Z,
// +07:00, …). A column without a time zone holds wall-clock times and
// takes no offset; one with a zone holds instants, and a value without an
// offset is taken only where the zone is UTC or a fixed offset (in a zone
// with summer time it could be either of two instants). A bare integer is
// the raw value, which quiver get writes for a year outside 0…9999, and is
// taken only there.
func parseTimestamp(v string, t *arrow.TimestampType, zone zoneRule) (int64, error) {
	if isDigits(strings.TrimPrefix(v, "-")) {
		return rawTimestamp(v, t)
	}
	if len(v) < 10 {
		return 0, errors.New("not a timestamp (2006-01-02 15:04:05.999999999, and a UTC offset such as +01:00 or Z)")
	}
	days, err := parseDate(v[:10], 4)
	if err != nil {
		return 0, errors.New("not a timestamp (2006-01-02 15:04:05.999999999, and a UTC offset such as +01:00 or Z)")
	}
	sec, nanos, rest := days*86400, int64(0), v[10:]
	if rest != "" && (rest[0] == ' ' || rest[0] == 'T' || rest[0] == 't') {
		s, ns, _, r, err := parseClock(rest[1:])
		if err != nil {
			return 0, err
		}
		sec, nanos, rest = sec+s, ns, r
	}
	if rest != "" {
		off, ok := parseOffset(rest)
		switch {
		case !ok:
			return 0, fmt.Errorf("not a timestamp: %s after the date and time is no UTC offset (Z, +01:00)", quoteShort(rest))
		case zone.naive:
			return 0, fmt.Errorf("has a UTC offset, but %s has no time zone (its values are wall-clock times): leave the offset out, "+
				"or write the profile a version whose type has a zone", t)
		}
		sec -= off
	} else if !zone.naive {
		if !zone.fixed {
			return 0, fmt.Errorf("has no UTC offset, and in the time zone %s of %s a wall-clock time may be either of two instants: "+
				"write it with its offset (%s+01:00) or in UTC (…Z)", zone.loc, t, v)
		}
		sec -= zone.offset
	}
	return inUnit(sec, nanos, t.Unit, t)
}

func isDigits(s string) bool { return s != "" && allDigitsStr(s) }

// rawTimestamp takes a bare integer as the raw value of a timestamp whose
// year is outside 0…9999 (which quiver get writes as its number), and
// refuses it for any other: a number of seconds in a column of
// milliseconds would be a wrong instant.
func rawTimestamp(v string, t *arrow.TimestampType) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("beyond the range of %s", t)
	}
	per := unitNanos(t.Unit)
	sec := n / (int64(time.Second) / per)
	// A year outside 0…9999 in any zone is a year outside 1…9998 in UTC.
	const year1, year9999 = -62135596800, 253370764800 // 0001-01-01, 9999-01-01 UTC
	if sec > year1 && sec < year9999 {
		return 0, fmt.Errorf("a bare number, not a timestamp: write it as %s (with its offset where the type has a zone); "+
			"quiver get writes a number only for a year outside 0–9999", timestampForm[:19])
	}
	return n, nil
}
