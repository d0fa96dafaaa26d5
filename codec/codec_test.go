package codec_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/srqueue/srq/codec"
)

type event struct {
	User   string            `json:"user" msgpack:"user"`
	Seq    int64             `json:"seq" msgpack:"seq"`
	Tags   []string          `json:"tags" msgpack:"tags"`
	Extras map[string]string `json:"extras" msgpack:"extras"`
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	in := event{User: "ü-42", Seq: 1 << 60, Tags: []string{"a", ""}, Extras: map[string]string{"k": "v"}}
	for _, c := range []codec.Codec{codec.MsgPack{}, codec.JSON{}, codec.JSON{DisallowUnknownFields: true}} {
		b, err := c.Marshal(in)
		if err != nil {
			t.Fatalf("%s marshal: %v", c.Name(), err)
		}
		var out event
		if err := c.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s unmarshal: %v", c.Name(), err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("%s: %+v != %+v", c.Name(), out, in)
		}
	}
	raw := []byte{0, 1, 255}
	b, err := codec.Raw{}.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := (codec.Raw{}).Unmarshal(b, &out); err != nil || !reflect.DeepEqual(out, raw) {
		t.Fatalf("raw: %v %v", out, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		c    codec.Codec
		data []byte
		into any
	}{
		{codec.MsgPack{}, []byte{0xc1}, new(event)},
		{codec.MsgPack{}, []byte("\xa3abc"), new(int)},
		{codec.JSON{}, []byte("{"), new(event)},
		{codec.JSON{}, []byte(`{"user":1}`), new(event)},
		{codec.JSON{}, []byte(`{} {}`), new(event)},
		{codec.JSON{DisallowUnknownFields: true}, []byte(`{"nope":1}`), new(event)},
		{codec.Raw{}, []byte("x"), new(string)},
		{codec.Raw{}, []byte("x"), (*[]byte)(nil)},
		{codec.JSON{}, []byte("{}"), (*event)(nil)},
		{codec.MsgPack{}, []byte{0x80}, (*event)(nil)},
	}
	for _, tc := range cases {
		if err := tc.c.Unmarshal(tc.data, tc.into); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("%s %q into %T: %v, want ErrDecode", tc.c.Name(), tc.data, tc.into, err)
		}
	}
	if _, err := (codec.Raw{}).Marshal("a string"); err == nil {
		t.Error("raw codec encoded a string")
	}
}

func FuzzDecodeNeverPanics(f *testing.F) {
	for _, s := range []string{"", "{}", "\x80", "\xde\x00\x01", `{"user":"x","tags":[1]}`, "\xc1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range []codec.Codec{codec.MsgPack{}, codec.JSON{}, codec.Raw{}} {
			var e event
			_ = c.Unmarshal(data, &e)
			var b []byte
			_ = c.Unmarshal(data, &b)
			var m map[string]any
			if err := c.Unmarshal(data, &m); err == nil && c.Name() != "raw" {
				// what decoded must encode again, and what encoded must decode (no honest payload
				// is refused by the length checks)
				again, err := c.Marshal(m)
				if err != nil {
					t.Fatalf("%s: decoded %v but cannot encode it: %v", c.Name(), m, err)
				}
				var m2 map[string]any
				if err := c.Unmarshal(again, &m2); err != nil {
					t.Fatalf("%s: cannot decode its own encoding of %v: %v", c.Name(), m, err)
				}
			}
		}
	})
}

// TestMsgPackRefusesLengthBombs: a header that declares more elements than the payload holds is
// refused when the decoder reads it. The decoder would make a map or slice of the declared length
// first: the map32 below (found by FuzzDecodeNeverPanics) made it allocate 24 GB and die.
func TestMsgPackRefusesLengthBombs(t *testing.T) {
	bombs := map[string][]byte{
		"map32 of 1.6e9 entries":     []byte("\xdfb\xe8\xf0A\xdd^\xc0"),
		"array32 of 4e9 values":      []byte("\xdd\xff\xff\xff\xff\x01"),
		"map16 in an array":          []byte("\x91\xde\xff\xff\x01\x02"),
		"nested arrays, sum too big": []byte("\x92\x93\x01\x02\x03\x92\x01"),
		"str32 of 4 GB":              []byte("\xdb\xff\xff\xff\xff" + "abc"),
		"bin32 of 2 GB":              []byte("\xc6\x7f\xff\xff\xff\x00"),
		"ext32 of 4 GB":              []byte("\xc9\xff\xff\xff\xff\x01\x00"),
	}
	for name, data := range bombs {
		var m map[string]any
		if err := (codec.MsgPack{}).Unmarshal(data, &m); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("%s into map[string]any: %v, want ErrDecode", name, err)
		}
		var s []any
		if err := (codec.MsgPack{}).Unmarshal(data, &s); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("%s into []any: %v, want ErrDecode", name, err)
		}
	}
	// Honest containers, nested and with trailing siblings, still decode.
	var v []any
	if err := (codec.MsgPack{}).Unmarshal([]byte("\x93\x92\x01\x02\x81\xa1k\xc3\xa2hi"), &v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, []any{[]any{int8(1), int8(2)}, map[string]any{"k": true}, "hi"}) {
		t.Fatalf("decoded %#v", v)
	}
}
