package codec_test

import (
	"testing"
	"time"

	"github.com/srqueue/srq/codec"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkMsgPackUnmarshal compares srq's checked decode (the library reading through the guarded
// reader) with the library's own, for a payload without an extension and one with a time.Time.
func BenchmarkMsgPackUnmarshal(b *testing.B) {
	type plain struct {
		User  string
		Count int
		Tags  []string
		Meta  map[string]any
	}
	type timed struct {
		User  string
		Count int
		Tags  []string
		Meta  map[string]any
		At    time.Time
	}
	meta := map[string]any{"source": "web", "retries": 2}
	payloads := []struct {
		name string
		v    any
		dest func() any
	}{
		{"plain", plain{"user-1234", 7, []string{"a", "b"}, meta}, func() any { return new(plain) }},
		{"with-time", timed{"user-1234", 7, []string{"a", "b"}, meta, time.Unix(1_700_000_000, 5)}, func() any { return new(timed) }},
	}
	for _, p := range payloads {
		data, err := msgpack.Marshal(p.v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(p.name+"/library", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := msgpack.Unmarshal(data, p.dest()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(p.name+"/srq", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := (codec.MsgPack{}).Unmarshal(data, p.dest()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
