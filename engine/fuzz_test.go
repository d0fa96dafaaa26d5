package engine

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// FuzzTaskID checks validID against its definition for arbitrary strings: it never panics, and it
// accepts exactly the non-empty valid UTF-8 ids of at most MaxIDLen bytes (and the empty id where
// one will be generated). An accepted id names a task key that ends with it.
func FuzzTaskID(f *testing.F) {
	for _, s := range []string{"", "a", NewID(), "\xff", "ü", strings.Repeat("i", MaxIDLen), strings.Repeat("i", MaxIDLen+1),
		"t:x", "{q}", "*", "a\x00b", strings.Repeat("ü", MaxIDLen/2)} {
		f.Add(s)
	}
	keys, err := NewKeys("srq", "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		want := id != "" && len(id) <= MaxIDLen && utf8.ValidString(id)
		if got := validID(id, false) == nil; got != want {
			t.Fatalf("validID(%q) accepted=%v, want %v", id, got, want)
		}
		if got := validID(id, true) == nil; got != (want || id == "") {
			t.Fatalf("validID(%q, empty ok) accepted=%v", id, got)
		}
		if want && !strings.HasSuffix(keys.Task(id), "t:"+id) {
			t.Fatalf("Task(%q) = %q", id, keys.Task(id))
		}
	})
}

// FuzzPublish sends arbitrary publish inputs (id, partition, priority, delay, payload, a header)
// through validation and the publish script on a real Redis. Publish must never panic; it either
// refuses the message with ErrInvalid, writing nothing, or stores it so that Task reads back
// exactly what was sent and, when it is due now, Fetch hands it out with the same bytes.
func FuzzPublish(f *testing.F) {
	f.Add("", "", 0, int64(0), []byte("x"), "", "")
	f.Add("id-1", "!user:42", 7, int64(0), []byte{0, 255, '\n'}, "traceparent", "00-01")
	f.Add("ü", "a:b", -3, int64(5000), []byte(nil), "k", "")
	f.Add("\xff", "!", 1<<31, int64(-1), []byte("bad"), "\x00", "\xff")
	f.Add("t:x", "{q}", -(1 << 31), int64(0), bytes.Repeat([]byte("p"), 300), "a", strings.Repeat("v", 100))
	f.Add(strings.Repeat("i", MaxIDLen+1), strings.Repeat("p", partition.MaxLen+1), 0, int64(0), []byte("x"), "", "")
	f.Fuzz(func(t *testing.T, id, part string, prio int, delayMs int64, payload []byte, hk, hv string) {
		b := setup(t, Config{MaxPayloadBytes: 1 << 10})
		defer func() { _ = redistest.DropKeys(b.ctx, b.client, b.eng.Keys().Base()) }()
		m := Message{ID: id, Partition: partition.Key(part), Priority: prio, Payload: payload,
			Delay: time.Duration(delayMs) * time.Millisecond}
		if hk != "" || hv != "" {
			m.Headers = map[string]string{hk: hv}
		}
		invalid := b.eng.validateMessage(&m)
		res, err := b.eng.Publish(b.ctx, []Message{m})
		if invalid != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("publish of %+v: %v; validation says %v", m, err, invalid)
			}
			if s := b.stats(); s.Published != 0 || s.Pending != 0 {
				t.Fatalf("a refused publish changed the stats: %+v", s)
			}
			return
		}
		if err != nil || len(res) != 1 || res[0].Duplicate || (id != "" && res[0].ID != id) {
			t.Fatalf("publish of %+v: %+v, %v", m, res, err)
		}
		ti, err := b.eng.Task(b.ctx, res[0].ID)
		if err != nil {
			t.Fatalf("task %q: %v", res[0].ID, err)
		}
		if ti.State != StatePending || ti.Partition != m.Partition || ti.Priority != prio ||
			!bytes.Equal(ti.Payload, payload) || !maps.Equal(ti.Headers, m.Headers) {
			t.Fatalf("published %+v, read back %+v", m, ti)
		}
		if m.Delay > 0 {
			return
		}
		ds := b.fetch("c", 1)
		if len(ds) != 1 || ds[0].ID != res[0].ID || !bytes.Equal(ds[0].Payload, payload) ||
			!maps.Equal(ds[0].Headers, m.Headers) || ds[0].Partition != m.Partition || ds[0].Priority != prio {
			t.Fatalf("published %+v, fetched %+v", m, ds)
		}
		b.ack(ds...)
	})
}
