package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"strings"
	"testing"
)

func TestHeadersRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    map[string]string
	}{
		{"nil", nil},
		{"empty", map[string]string{}},
		{"one", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		{"empty key and value", map[string]string{"": ""}},
		{"empty value", map[string]string{"k": ""}},
		{"many, unsorted", map[string]string{"z": "1", "a": "2", "m": "3", "b": "", "": "e"}},
		{"binary", map[string]string{"\x00\xff": "\x80\x01\x00", "\xff": "\x00"}},
		{"unicode", map[string]string{"ü": "日本語", "🙂": "ok"}},
		{"separators", map[string]string{"a:b": "{x}", "*": "\n\r\t", "=": "&"}},
		{"long value", map[string]string{"big": strings.Repeat("v", 1<<16)}},
		{"long key", map[string]string{strings.Repeat("k", 300): "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			enc := encodeHeaders(tt.h)
			if len(tt.h) == 0 && enc != nil {
				t.Fatalf("no headers encode to %q, want nothing", enc)
			}
			if !bytes.Equal(enc, encodeHeaders(maps.Clone(tt.h))) {
				t.Fatal("encoding is not deterministic")
			}
			got, err := decodeHeaders(enc)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !maps.Equal(got, tt.h) {
				t.Fatalf("round trip = %q, want %q", got, tt.h)
			}
		})
	}
}

// TestHeadersEncoding pins the wire format, which is stored in Redis and so must not change.
func TestHeadersEncoding(t *testing.T) {
	t.Parallel()
	got := encodeHeaders(map[string]string{"b": "22", "a": ""})
	want := []byte("\x02\x01a\x00\x01b\x0222")
	if !bytes.Equal(got, want) {
		t.Fatalf("encodeHeaders = %q, want %q", got, want)
	}
}

func TestHeadersDecodeMalformed(t *testing.T) {
	t.Parallel()
	long := binary.AppendUvarint(nil, 1<<62)
	tests := []struct {
		name string
		b    []byte
	}{
		{"bad count varint", []byte{0x80}},
		{"overlong count varint", []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")},
		{"count beyond length", []byte{0x05, 0x00, 0x00}},
		{"huge count", append(long, 0x00, 0x00)},
		{"missing key", []byte{0x01}},
		{"missing value", []byte("\x01\x01a")},
		{"truncated key", []byte("\x01\x05ab")},
		{"truncated value", []byte("\x01\x01a\x03xy")},
		{"huge key length", append([]byte{0x01}, append(long, 'a')...)},
		{"max uint64 length", append([]byte{0x01}, binary.AppendUvarint(nil, 1<<64-1)...)},
		{"trailing byte", []byte("\x01\x01a\x01b!")},
		{"zero count, trailing", []byte{0x00, 0x00}},
		{"second pair missing", []byte("\x02\x01a\x01b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := decodeHeaders(tt.b)
			if !errors.Is(err, errBadHeaders) {
				t.Fatalf("decodeHeaders(%q) = %q, %v; want errBadHeaders", tt.b, h, err)
			}
			if h != nil {
				t.Fatalf("decodeHeaders(%q) failed but returned %q", tt.b, h)
			}
		})
	}
}

// FuzzDecodeHeaders feeds arbitrary bytes to decodeHeaders: it must never panic, and what it
// accepts must encode to bytes that decode to the same headers.
func FuzzDecodeHeaders(f *testing.F) {
	for _, b := range [][]byte{
		nil, {0x00}, {0x80}, {0x01}, []byte("\x01\x01a\x01b"), []byte("\x02\x01a\x00\x01b\x0222"),
		[]byte("\x02\x01a\x01b\x01a\x01c"), // a repeated key: the last value wins
		[]byte("\x01\x81\x00\x00"),         // a non-minimal length varint
		[]byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
		[]byte("\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01a"),
		encodeHeaders(map[string]string{"traceparent": "00-abc-01", "ü": "\xff"}),
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeaders(b)
		if err != nil {
			if !errors.Is(err, errBadHeaders) || h != nil {
				t.Fatalf("decodeHeaders(%q) = %q, %v", b, h, err)
			}
			return
		}
		again, err := decodeHeaders(encodeHeaders(h))
		if err != nil {
			t.Fatalf("decodeHeaders(encodeHeaders(%q)): %v", h, err)
		}
		if !maps.Equal(again, h) {
			t.Fatalf("decoded %q, re-encoded and decoded %q", h, again)
		}
		// A canonical encoding (sorted keys, minimal varints, no repeats) is the one encodeHeaders
		// makes; accepting other encodings is fine, but encoding must be stable from then on.
		if enc := encodeHeaders(h); !bytes.Equal(encodeHeaders(again), enc) {
			t.Fatalf("encoding of %q is not stable", h)
		}
	})
}

// FuzzHeadersRoundTrip builds headers from arbitrary strings and checks they survive a round trip.
func FuzzHeadersRoundTrip(f *testing.F) {
	f.Add("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", "", "k", "v")
	f.Add("", "", "a", "", "a", "duplicate key")
	f.Add("\x00", "\xff", "ü", "日本語", "{x}", "a:b")
	f.Add("b", "1", "a", "2", "c", "3")
	f.Add(strings.Repeat("k", 200), strings.Repeat("v", 200), "\x80", "\x80", "*", "\n")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		h := map[string]string{k1: v1, k2: v2, k3: v3}
		enc := encodeHeaders(h)
		got, err := decodeHeaders(enc)
		if err != nil {
			t.Fatalf("decodeHeaders(encodeHeaders(%q)): %v", h, err)
		}
		if !maps.Equal(got, h) {
			t.Fatalf("round trip of %q = %q", h, got)
		}
		if !bytes.Equal(encodeHeaders(got), enc) {
			t.Fatalf("encoding of %q is not deterministic", h)
		}
		// Any strict prefix of an encoding is truncated, so it must be refused.
		for n := 1; n < len(enc) && n < 64; n++ {
			if h, err := decodeHeaders(enc[:n]); err == nil {
				t.Fatalf("decodeHeaders accepted the truncated encoding %q as %q", enc[:n], h)
			}
		}
	})
}
