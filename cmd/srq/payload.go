package main

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

// payloadWidth is the most runes of a payload srq task shows; --json has it whole.
const payloadWidth = 500

// payloadText is how srq task shows a payload: a JSON payload as compact JSON, a msgpack one (the
// default codec's) decoded and shown as JSON, anything else as an escaped Go string. A payload
// that is printable text is never read as msgpack, in which most bytes are values of their own
// ("5" is the number 53), unless it decodes to a map or an array, as a struct does.
func payloadText(p []byte) string {
	head := fmt.Sprintf("%d byte%s", len(p), plural(len(p)))
	if len(p) == 0 {
		return head
	}
	var compact bytes.Buffer
	if json.Valid(p) && json.Compact(&compact, p) == nil {
		return head + ", JSON: " + oneLine(escapeText(compact.String()), payloadWidth)
	}
	if js, ok := msgpackJSON(p); ok {
		return head + ", msgpack: " + oneLine(escapeText(js), payloadWidth)
	}
	return head + ": " + oneLine(fmt.Sprintf("%q", p), payloadWidth)
}

// msgpackJSON decodes p as one msgpack value, with nothing after it, and returns it as JSON.
func msgpackJSON(p []byte) (string, bool) {
	r := bytes.NewReader(p)
	dec := msgpack.NewDecoder(r) // a *bytes.Reader is read as it is, not through a buffer
	var v msgpackValue
	if err := dec.Decode(&v); err != nil || r.Len() > 0 {
		return "", false
	}
	switch v.v.(type) {
	case map[string]any, []any:
	default:
		if printableText(p) {
			return "", false
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.v); err != nil { // NaN or an infinity
		return "", false
	}
	return string(bytes.TrimSuffix(out.Bytes(), []byte("\n"))), true
}

func printableText(p []byte) bool {
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

// msgpackValue decodes any msgpack value into what encoding/json can write: maps with keys of any
// type become map[string]any (a key that is not a string is written with fmt), arrays []any.
type msgpackValue struct{ v any }

// maxMsgpackDepth bounds the nesting msgpackValue follows.
const maxMsgpackDepth = 200

var errMsgpackShape = errors.New("msgpack: too deep, or a length beyond the payload")

// DecodeMsgpack decodes one value of any type from d.
func (m *msgpackValue) DecodeMsgpack(d *msgpack.Decoder) error {
	var err error
	m.v, err = decodeAny(d, 0)
	return err
}

// decodeAny reads maps and arrays itself, so that a declared length is checked against the bytes
// left before anything is made for it; the decoder's own reads bound what they allocate.
func decodeAny(d *msgpack.Decoder, depth int) (any, error) {
	if depth > maxMsgpackDepth {
		return nil, errMsgpackShape
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
		if err != nil || !left(n) {
			return nil, cmpErr(err, errMsgpackShape)
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
		if err != nil || !left(n) {
			return nil, cmpErr(err, errMsgpackShape)
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
		return d.DecodeBytes() // []byte, which JSON writes as base64
	}
	return d.DecodeInterfaceLoose()
}
