package payload

import (
	"encoding/json"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	type order struct {
		ID    int            `msgpack:"id"`
		Items []string       `msgpack:"items"`
		Blob  []byte         `msgpack:"blob"`
		Codes map[int]string `msgpack:"codes"`
	}
	mp, err := msgpack.Marshal(order{ID: 7, Items: []string{"a"}, Blob: []byte{0, 1}, Codes: map[int]string{404: "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	str, _ := msgpack.Marshal("hello")
	deep := make([]byte, 0, 300)
	for range 300 {
		deep = append(deep, 0x91) // an array of one element, 300 deep
	}
	for _, tt := range []struct {
		in     []byte
		format Format
		json   string
	}{
		{nil, FormatEmpty, ""},
		{[]byte(` {"a": [1, 2]} `), FormatJSON, `{"a":[1,2]}`},
		{[]byte("5"), FormatJSON, "5"},
		{mp, FormatMsgpack, `{"blob":"AAE=","codes":{"404":"gone"},"id":7,"items":["a"]}`},
		{str, FormatMsgpack, `"hello"`},
		{[]byte("plain text"), FormatText, ""},
		{[]byte{0xdc, 0xff, 0xff}, FormatBinary, ""},              // an array16 claiming 65535 elements in 3 bytes
		{[]byte{0x82, 0xa1, 'n', 0x01}, FormatBinary, ""},         // a map cut short
		{append(append([]byte{}, mp...), 0x01), FormatBinary, ""}, // bytes after the value
		{append(deep, 0x01), FormatBinary, ""},
	} {
		format, js := Decode(tt.in)
		if format != tt.format || string(js) != tt.json {
			t.Errorf("Decode(%q) = %s %s, want %s %s", tt.in, format, js, tt.format, tt.json)
		}
	}
}

// FuzzDecode: Decode never panics, and whatever it calls JSON is valid JSON.
func FuzzDecode(f *testing.F) {
	mp, _ := msgpack.Marshal(map[string]any{"a": []any{1, "x", nil, 2.5}})
	for _, s := range [][]byte{nil, []byte(`{"a":1}`), mp, {0xdd, 0xff, 0xff, 0xff, 0xff}, {0xc4, 0x02, 0x1b}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		format, js := Decode(p)
		switch format {
		case FormatJSON, FormatMsgpack:
			if !json.Valid(js) {
				t.Fatalf("Decode(%q) = %s %q: not JSON", p, format, js)
			}
		default:
			if js != nil {
				t.Fatalf("Decode(%q) = %s with JSON %q", p, format, js)
			}
		}
	})
}
