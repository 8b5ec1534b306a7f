package continuation

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// appendCanonicalJSON appends the canonical JSON text of v to b: the same text for every
// Value that reads as the same JSON, however it was built or carried (proto, protojson,
// a JSON client's own encoder), so that it can be hashed. It follows RFC 8785 (JSON
// Canonicalization Scheme) with two departures, both fixed by digest version 1:
//
//   - Object keys are sorted by their UTF-8 bytes (code points), not by UTF-16 code
//     units; the two orders differ only for keys mixing characters above U+FFFF with
//     ones in U+E000-U+FFFF.
//   - NaN and ±Inf, which JSON cannot hold but a Value's number can, are written as the
//     bare words NaN, Infinity and -Infinity, so that they hash apart from every JSON
//     value. No transcript agentd writes holds them (a tool's output is parsed JSON, and
//     a client's is refused by the wire's conversion), and no JSON client can send them back
//     (protojson refuses to write them), but the projection still needs one form for
//     each.
//
// Numbers are written as ECMAScript writes them (shortest form that reads back as the
// same float64; exponent only below 1e-6 and from 1e21), and -0 as 0. Strings escape
// only '"', '\\' and control characters; other characters are written as they are. A
// Value with no kind set is null, as [structpb.Value.AsInterface] reads it. A string
// (or key) that is not valid UTF-8 is refused: proto cannot carry it, so no client
// could send it back.
func appendCanonicalJSON(b []byte, v *structpb.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		return appendCanonicalNumber(b, k.NumberValue)
	case *structpb.Value_StringValue:
		return appendCanonicalString(b, k.StringValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonicalJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case *structpb.Value_StructValue:
		fields := k.StructValue.GetFields()
		keys := make([]string, 0, len(fields))
		for key := range fields {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, key := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonicalString(b, key); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendCanonicalJSON(b, fields[key]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	// NullValue, and a Value with no kind.
	return append(b, "null"...), nil
}

func appendCanonicalNumber(b []byte, f float64) ([]byte, error) {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...), nil
	case math.IsInf(f, 1):
		return append(b, "Infinity"...), nil
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...), nil
	case f == 0:
		return append(b, '0'), nil // -0 too
	}
	// ECMAScript's Number::toString, as encoding/json also writes float64.
	format := byte('f')
	if abs := math.Abs(f); abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 becomes 1e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func appendCanonicalString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, errors.New("a JSON string is not valid UTF-8")
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(b, '"'), nil
}
