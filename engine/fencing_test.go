package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// snapshot returns every key of b's queue as DUMP gives it.
func (b *bundle) snapshot() map[string]string {
	b.t.Helper()
	out := map[string]string{}
	for name := range b.keysInRedis() {
		v, err := b.client.Dump(b.ctx, name).Result()
		if err != nil {
			b.t.Fatalf("dump %q: %v", name, err)
		}
		out[name] = v
	}
	return out
}

// restore replaces the queue's keys with snap: what a promoted replica that missed the writes
// since snap, or a restore from an older backup, leaves.
func (b *bundle) restore(snap map[string]string) {
	b.t.Helper()
	for name := range b.keysInRedis() {
		if err := b.client.Del(b.ctx, name).Err(); err != nil {
			b.t.Fatal(err)
		}
	}
	for name, v := range snap {
		if err := b.client.Restore(b.ctx, name, 0, v).Err(); err != nil {
			b.t.Fatalf("restore %q: %v", name, err)
		}
	}
}

// TestTokensAfterLostWrites: Redis loses a fetch (a failover to a replica that had not received it,
// or a restore of an older snapshot), so the seq counter goes back. The task is delivered again
// with a token larger than the forgotten delivery's, whose holder can then settle nothing.
func TestTokensAfterLostWrites(t *testing.T) {
	t.Parallel()
	for _, p := range []partition.Key{partition.Ordered("o"), "u"} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.server.NeedReal(t, "DUMP and RESTORE of hashes and sorted sets, which the embedded Redis lacks")
			b.publish(Message{ID: "a", Partition: p})
			snap := b.snapshot()
			old := b.fetch("old", 1)
			// A failover takes seconds; the counter's promise needs 100 ms and then some.
			b.waitServerPast(b.serverNow().Add(150 * time.Millisecond))
			b.restore(snap)
			cur := b.fetch("new", 1)
			if len(old) != 1 || len(cur) != 1 || cur[0].ID != "a" {
				t.Fatalf("deliveries %+v then %+v", old, cur)
			}
			if cur[0].Token <= old[0].Token {
				t.Fatalf("token %d after the lost delivery's %d", cur[0].Token, old[0].Token)
			}
			errs, err := b.eng.Ack(b.ctx, []Receipt{old[0].Receipt()})
			if err != nil || !errors.Is(errs[0], ErrStaleToken) {
				t.Fatalf("the forgotten delivery's ack: %v, %v; want ErrStaleToken", errs, err)
			}
			b.ack(cur...)
		})
	}
}

// TestTokensFollowTheClock: the counter is kept above the server clock in ms × 1000, so a restored
// counter restarts above every token handed out more than 100 ms before, and it never goes back.
func TestTokensFollowTheClock(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var last Token
	for i := 0; i < 3; i++ {
		b.publish(Message{})
		floor := Token(b.serverNow().UnixMilli() * 1000)
		d := b.fetch("c", 1)
		if d[0].Token <= last || d[0].Token <= floor {
			t.Fatalf("token %d: want above %d and the clock floor %d", d[0].Token, last, floor)
		}
		last = d[0].Token
		b.ack(d...)
		if err := b.client.Set(b.ctx, b.eng.Keys().Seq(), "7", 0).Err(); err != nil {
			t.Fatal(err)
		}
		b.waitServerPast(b.serverNow().Add(110 * time.Millisecond))
	}
}
