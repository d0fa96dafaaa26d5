// Package payload renders task payloads for people: the srq command and the dashboard show a
// payload written by the JSON codec or the msgpack codec (the default) as JSON, and anything else
// as text or bytes. The task record does not say which codec wrote a payload, so the format is
// recognised from the bytes. It is machinery of srq, not a stable API.
package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Format is how a payload was recognised.
type Format string

// The formats Decode recognises.
const (
	FormatEmpty   Format = "empty"   // no bytes
	FormatJSON    Format = "json"    // one JSON value (the JSON codec's)
	FormatMsgpack Format = "msgpack" // one msgpack value (the msgpack codec's), shown as JSON
	FormatText    Format = "text"    // printable UTF-8 that is neither
	FormatBinary  Format = "binary"  // anything else
)

// Decode recognises p and returns it as compact JSON for FormatJSON and FormatMsgpack (a msgpack
// byte string as base64, a map key that is not a string written with fmt), and nil for the other
// formats, whose bytes are shown as they are. A payload that is printable text is read as msgpack
// only when it decodes to a map or an array, as a struct does: in msgpack most single bytes are
// values of their own ("5" is the number 53). Decode never fails; it bounds the nesting and the
// declared lengths it follows by the bytes there are.
func Decode(p []byte) (Format, []byte) {
	if len(p) == 0 {
		return FormatEmpty, nil
	}
	var compact bytes.Buffer
	if json.Valid(p) && json.Compact(&compact, p) == nil {
		return FormatJSON, compact.Bytes()
	}
	if js, ok := msgpackJSON(p); ok {
		return FormatMsgpack, js
	}
	if Printable(p) {
		return FormatText, nil
	}
	return FormatBinary, nil
}

// Printable reports whether p is valid UTF-8 of printable characters and white space.
func Printable(p []byte) bool {
	if !utf8.Valid(p) {
		return false
	}
	for _, r := range string(p) {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// msgpackJSON decodes p as one msgpack value, with nothing after it, and returns it as JSON.
func msgpackJSON(p []byte) ([]byte, bool) {
	r := bytes.NewReader(p)
	dec := msgpack.NewDecoder(r) // a *bytes.Reader is read as it is, not through a buffer
	var v msgpackValue
	if err := dec.Decode(&v); err != nil || r.Len() > 0 {
		return nil, false
	}
	switch v.v.(type) {
	case map[string]any, []any:
	default:
		if Printable(p) {
			return nil, false
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.v); err != nil { // NaN or an infinity
		return nil, false
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), true
}

// msgpackValue decodes any msgpack value into what encoding/json can write: maps with keys of any
// type become map[string]any (a key that is not a string is written with fmt), arrays []any.
type msgpackValue struct{ v any }

// maxDepth bounds the nesting msgpackValue follows.
const maxDepth = 200

var errShape = errors.New("msgpack: too deep, or a length beyond the payload")

// DecodeMsgpack decodes one value of any type from d.
func (m *msgpackValue) DecodeMsgpack(d *msgpack.Decoder) error {
	var err error
	m.v, err = decodeAny(d, 0)
	return err
}

// decodeAny reads maps and arrays itself, so that a declared length is checked against the bytes
// left before anything is made for it; the decoder's own reads bound what they allocate.
func decodeAny(d *msgpack.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errShape
	}
	c, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	left := func(n int) bool {
		r, ok := d.Buffered().(*bytes.Reader)
		return n >= 0 && (!ok || n <= r.Len())
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.DecodeMapLen()
		if err != nil {
			return nil, err
		}
		if !left(n) {
			return nil, errShape
		}
		out := make(map[string]any, n)
		for range n {
			k, err := decodeAny(d, depth+1)
			if err != nil {
				return nil, err
			}
			v, err := decodeAny(d, depth+1)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				ks = fmt.Sprint(k)
			}
			out[ks] = v
		}
		return out, nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		if !left(n) {
			return nil, errShape
		}
		out := make([]any, 0, n)
		for range n {
			v, err := decodeAny(d, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32:
		// The decoder would make the declared length before reading it: check it first.
		n, err := d.DecodeBytesLen()
		if err != nil {
			return nil, err
		}
		if !left(n) {
			return nil, errShape
		}
		b := make([]byte, n)
		if err := d.ReadFull(b); err != nil {
			return nil, err
		}
		return b, nil // JSON writes a []byte as base64
	case c == msgpcode.Ext8 || c == msgpcode.Ext16 || c == msgpcode.Ext32:
		if !extFits(d, c) {
			return nil, errShape
		}
	}
	return d.DecodeInterfaceLoose()
}

// extFits reports whether the ext value at the decoder's position, whose code is c, declares no
// more bytes than are left, reading its header without moving on.
func extFits(d *msgpack.Decoder, c byte) bool {
	r, ok := d.Buffered().(*bytes.Reader)
	if !ok {
		return true
	}
	size := map[byte]int{msgpcode.Ext8: 1, msgpcode.Ext16: 2, msgpcode.Ext32: 4}[c]
	hdr := make([]byte, size)
	pos := r.Size() - int64(r.Len())
	if _, err := r.ReadAt(hdr, pos+1); err != nil {
		return false
	}
	var n uint64
	for _, b := range hdr {
		n = n<<8 | uint64(b)
	}
	return n <= uint64(r.Len())
}
