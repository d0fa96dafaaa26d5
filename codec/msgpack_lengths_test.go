package codec

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// wrapped is an extension (type 1) whose data are a msgpack value, which its decoder reads from
// the decoder's own stream: the guard must check lengths read that way too.
type wrapped struct{ V any }

// Registered at package initialization: the library's extension table is not safe to change
// while parallel tests decode.
var _ = func() bool {
	msgpack.RegisterExtEncoder(1, wrapped{}, func(_ *msgpack.Encoder, v reflect.Value) ([]byte, error) {
		return msgpack.Marshal(v.Interface().(wrapped).V)
	})
	msgpack.RegisterExtDecoder(1, wrapped{}, func(d *msgpack.Decoder, v reflect.Value, _ int) error {
		x, err := d.DecodeInterface()
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(wrapped{x}))
		return nil
	})
	return true
}()

// tree is a destination whose maps nest without end.
type tree map[string]tree

// TestGuardRefusesLengthsBeyondThePayload: the guarded reader checks each length as the decoder
// reads it, whatever it takes the bytes for. Where the destination is a map, the decoder reads an
// extension's data as the map and then reads on past it: the first case, found by
// FuzzDecodeNeverPanics, made it allocate a map of 808 million entries. The cases after "through a
// peek" were found in review of an earlier guard that only checked bytes outside extension data;
// the last two are containers nested so that each fits but together they claim far more than the
// payload. Each later case declares lengths the decoder could survive without the guard, so that a
// broken guard fails the test instead of the machine.
func TestGuardRefusesLengthsBeyondThePayload(t *testing.T) {
	t.Parallel()
	type withMap struct{ M map[string]any }
	// Nested maps read from extension data, each declaring about as many entries as bytes are
	// left: each alone fits, together they declare far more than the payload holds.
	var nested []byte
	for range 100 {
		nested = append(nested, "\xd6\x00\xde\x00\x00\xbf"+strings.Repeat("\x00", 31)...)
	}
	for i := 0; i < len(nested); i += 37 {
		binary.BigEndian.PutUint16(nested[i+3:], uint16((len(nested)-i-5)/2))
	}
	// The same without extensions: arrays of arrays, each declaring the bytes left.
	var arrays []byte
	for range 300 {
		arrays = append(arrays, 0xdc, 0, 0)
	}
	for i := 0; i < len(arrays); i += 3 {
		binary.BigEndian.PutUint16(arrays[i+1:], uint16(len(arrays)-i-3))
	}
	cases := map[string]struct {
		data []byte
		dest func() any
	}{
		"fixext4 holding a map32 header, into map[string]any": {
			[]byte("\xd6\x30\xdf" + strings.Repeat("0", 31)), func() any { return new(map[string]any) }},
		"the same into map[any]any": {
			[]byte("\xd6\x30\xdf" + strings.Repeat("0", 31)), func() any { return new(map[any]any) }},
		"the same as a struct field": {
			[]byte("\x81\xa1M\xd6\x30\xdf" + strings.Repeat("0", 31)), func() any { return new(withMap) }},
		"ext8 holding a map16 header": {
			[]byte("\xc7\x03\x05\xde\xff\xff" + strings.Repeat("\x01", 20)), func() any { return new(map[string]any) }},
		"fixext4 holding a map32 deeper in a map read from it": {
			[]byte("\xd6\x30\x81\xa1k\xdf\xff\xff\xff\x7f" + strings.Repeat("\x01", 20)), func() any { return new(map[string]any) }},
		"fixext1 holding a map32 header (an interned string's place)": {
			[]byte("\xd4\x80\xdf\x7f\xff\xff\xff" + strings.Repeat("\x01", 20)), func() any { return new(map[string]any) }},
		"through a peek for nil, whose error the decoder drops": {
			[]byte("\xd4\x00\x81\xa0\xdf\x00\x10\x00\x00"), func() any { return new(map[string]*map[string]any) }},
		"through a peek for nil, into a slice": {
			[]byte("\xd4\x00\x81\xa0\xdd\x00\x10\x00\x00"), func() any { return new(map[string]*[]any) }},
		"an extension decoder reading a code that was a header byte to the walk": {
			[]byte("\x92\xd4\x01\xc7\xc8\x01\xdd\x00\x10\x00\x00" + strings.Repeat("\x00", 474)), func() any { return new(any) }},
		"nested maps, each within the payload, together far beyond it": {
			nested, func() any { return new(tree) }},
		"nested arrays, each within the payload, together far beyond it": {
			arrays, func() any { return new(any) }},
	}
	for name, c := range cases {
		err := MsgPack{}.Unmarshal(c.data, c.dest())
		if !errors.Is(err, ErrDecode) || !errors.Is(err, errTooLong) {
			t.Errorf("%s: %v, want ErrDecode from the guard", name, err)
		}
	}
}

// TestGuardLetsHonestPayloadsThrough: the guard refuses nothing the decoder reads as it was written:
// timestamps whose bytes look like a map32 header beside maps, 8-bit values that look like one,
// interned strings, an extension whose decoder reads its data as msgpack values, and an extension
// whose data honestly hold the map read from it.
func TestGuardLetsHonestPayloadsThrough(t *testing.T) {
	t.Parallel()
	type record struct {
		At    time.Time // nanoseconds in [935329792, 939524095]: the data begin with 0xdf
		Meta  map[string]any
		Small uint8 // 0xdf
		Tiny  int8
		A, B  string `msgpack:",intern"`
		Raw   []byte
		Wrap  wrapped
		Wraps map[string]any
	}
	in := record{
		At:    time.Unix(1_700_000_000, 936_000_000).UTC(),
		Meta:  map[string]any{"k": "v", "n": int8(3), "when": time.Unix(5, 937_000_000).UTC()},
		Small: 0xdf, Tiny: -33,
		A: "shared", B: "shared",
		Raw:   []byte("\xdf\xff\xff\xff\xff"),
		Wrap:  wrapped{map[string]any{"list": []any{"a", "b"}}},
		Wraps: map[string]any{"w": wrapped{strings.Repeat("x", 300)}},
	}
	data, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out record
	if err := (MsgPack{}).Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	out.Meta["when"] = out.Meta["when"].(time.Time).UTC()
	out.At = out.At.UTC()
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("decoded %#v, want %#v", out, in)
	}

	// A fixext4 whose data are the map {"k": 1}: the decoder reads it as that map, and the check
	// of the value it finds there passes.
	var m map[string]any
	if err := (MsgPack{}).Unmarshal([]byte("\xd6\x30\x81\xa1k\x01"), &m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, map[string]any{"k": int8(1)}) {
		t.Fatalf("decoded %#v", m)
	}
}
