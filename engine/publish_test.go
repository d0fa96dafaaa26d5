package engine

import (
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

func TestIdempotentPublish(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	res, err := b.eng.Publish(b.ctx, []Message{{ID: "a"}, {ID: "b"}, {ID: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate {
		t.Fatalf("first batch %+v: want the repeated a reported", res)
	}
	ds := b.fetch("c", 1) // a is now leased
	res, _ = b.eng.Publish(b.ctx, []Message{{ID: "a", Payload: []byte("changed")}, {ID: "b"}, {ID: "c"}})
	if !res[0].Duplicate || !res[1].Duplicate || res[2].Duplicate {
		t.Fatalf("second batch %+v", res)
	}
	ti, _ := b.eng.Task(b.ctx, "a")
	if len(ti.Payload) != 0 || ti.State != StateLeased {
		t.Fatalf("a duplicate changed the task: %+v", ti)
	}
	if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt()}}); err != nil {
		t.Fatal(err)
	}
	if res, _ := b.eng.Publish(b.ctx, []Message{{ID: "a"}}); !res[0].Duplicate {
		t.Fatal("a dead letter's id was published again")
	}
	if s := b.stats(); s.Published != 3 || s.Duplicates != 4 || s.Pending != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDedupWindow(t *testing.T) {
	t.Parallel()
	for _, window := range []time.Duration{0, time.Hour} {
		b := setup(t, Config{DedupWindow: window})
		b.publish(Message{ID: "once"})
		b.ack(b.fetch("c", 1)...)
		res, err := b.eng.Publish(b.ctx, []Message{{ID: "once"}})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Duplicate != (window > 0) {
			t.Fatalf("window %v: duplicate=%v", window, res[0].Duplicate)
		}
	}
	t.Run("expires", func(t *testing.T) {
		b := setup(t, Config{DedupWindow: 50 * time.Millisecond})
		b.publish(Message{ID: "x"})
		b.ack(b.fetch("c", 1)...)
		b.waitServerPast(b.serverNow().Add(60 * time.Millisecond))
		b.publish(Message{ID: "x"}) // fails the test if reported duplicate
	})
}

func TestGeneratedIDsAndFields(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	h := map[string]string{"traceparent": "00-abc", "empty": ""}
	res, err := b.eng.Publish(b.ctx, []Message{{Partition: partition.Ordered("p"), Priority: 3, MaxAttempts: 4, Headers: h, Payload: []byte{0, 1, 2, 255}}})
	if err != nil || len(res[0].ID) != 26 {
		t.Fatalf("%+v %v", res, err)
	}
	ds := b.fetch("c", 1)
	d := ds[0]
	if d.ID != res[0].ID || d.Priority != 3 || d.MaxAttempts != 4 || d.Partition != partition.Ordered("p") ||
		string(d.Payload) != "\x00\x01\x02\xff" || d.Headers["traceparent"] != "00-abc" || len(d.Headers) != 2 {
		t.Fatalf("delivery %+v", d)
	}
}
