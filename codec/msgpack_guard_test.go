package codec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestGuardRefusesValuesReadFromExtensionData: where the destination is a map, the decoder reads an
// extension's data as the map and then reads on past it. checkSizes cannot see that value (an
// extension's data are opaque to it), so the guarded reader checks it when the decoder reads its
// code, and the decoder never gets the declared length. The first case, found by
// FuzzDecodeNeverPanics, made the decoder allocate a map of 808 million entries.
func TestGuardRefusesValuesReadFromExtensionData(t *testing.T) {
	t.Parallel()
	type withMap struct{ M map[string]any }
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
	}
	for name, c := range cases {
		if _, err := checkSizes(c.data); err != nil {
			t.Fatalf("%s: checkSizes refused it (%v); the case must test the guard", name, err)
		}
		err := MsgPack{}.Unmarshal(c.data, c.dest())
		if !errors.Is(err, ErrDecode) || !errors.Is(err, errDiverged) {
			t.Errorf("%s: %v, want ErrDecode from the guard", name, err)
		}
	}
}

// TestGuardLetsHonestPayloadsThrough: the guard refuses nothing the decoder reads as it was written:
// timestamps whose bytes look like a map32 header beside maps, 8-bit values that look like one,
// interned strings, and an extension whose data honestly hold the map read from it.
func TestGuardLetsHonestPayloadsThrough(t *testing.T) {
	t.Parallel()
	type record struct {
		At    time.Time // nanoseconds in [935329792, 939524095]: the data begin with 0xdf
		Meta  map[string]any
		Small uint8 // 0xdf
		Tiny  int8
		A, B  string `msgpack:",intern"`
		Raw   []byte
	}
	in := record{
		At:    time.Unix(1_700_000_000, 936_000_000).UTC(),
		Meta:  map[string]any{"k": "v", "n": int8(3), "when": time.Unix(5, 937_000_000).UTC()},
		Small: 0xdf, Tiny: -33,
		A: "shared", B: "shared",
		Raw: []byte("\xdf\xff\xff\xff\xff"),
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
