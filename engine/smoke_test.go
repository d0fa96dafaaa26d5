package engine

import (
	"testing"

	"github.com/srqueue/srq/partition"
)

func TestPublishFetchAck(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ids := b.publish(msg(partition.Ordered("u1"), "a"), msg(partition.Ordered("u1"), "b"), msg("", "c"))
	ds := b.fetch("c1", 10)
	if len(ds) != 3 {
		t.Fatalf("fetched %d, want 3: %+v", len(ds), ds)
	}
	t.Logf("%+v", ds)
	b.ack(ds...)
	s := b.stats()
	if s.Pending != 0 || s.InFlight != 0 || s.Acked != 3 || s.Published != 3 {
		t.Fatalf("stats %+v", s)
	}
	_ = ids
	keys, _ := b.client.Keys(b.ctx, "*"+b.eng.cfg.Queue+"*").Result()
	t.Logf("keys left: %v", keys)
}
