package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestProbe: one call reads what is due in each of several queues, each from its own keys, and
// nothing of one queue shows in another's answer.
func TestProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	now, err := b.client.Time(b.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms := func(d time.Duration) float64 { return float64(now.Add(d).UnixMilli()) }
	const abandon = time.Minute
	seeds := []struct {
		name string
		keys map[string]float64 // key suffix -> the score of its one member
		want Due
	}{
		{name: "idle", want: Due{NextSchedule: -1}},
		{name: "expired lease", keys: map[string]float64{"inflight": ms(-time.Second)}, want: Due{Expired: true, NextSchedule: -1}},
		{name: "lease not expired", keys: map[string]float64{"inflight": ms(time.Hour)}, want: Due{NextSchedule: -1}},
		{name: "outcome past retention", keys: map[string]float64{"outs": ms(-time.Second)}, want: Due{Upkeep: true, NextSchedule: -1}},
		{name: "ended flow past retention", keys: map[string]float64{"flowsx": ms(-time.Second)}, want: Due{Upkeep: true, NextSchedule: -1}},
		{name: "kept outcome", keys: map[string]float64{"outs": ms(time.Hour), "flowsx": ms(time.Hour)}, want: Due{NextSchedule: -1}},
		{name: "schedule due", keys: map[string]float64{"crondue": ms(-time.Second)}, want: Due{Schedules: true, NextSchedule: -1}},
		{name: "schedule later", keys: map[string]float64{"crondue": ms(time.Hour)}, want: Due{NextSchedule: time.Hour}},
		// A set as a load leaves it (the embedded Redis has no encodings).
		{name: "listpack", keys: map[string]float64{"depth": ms(0)}, want: Due{Convert: b.server.Real(), NextSchedule: -1}},
		{name: "outbox", keys: map[string]float64{"fo": ms(0)}, want: Due{Outbox: 1, NextSchedule: -1}},
		{name: "abandoned publish", keys: map[string]float64{"flowsp": ms(-2 * abandon)}, want: Due{AbandonedFlows: true, NextSchedule: -1}},
		{name: "publish under way", keys: map[string]float64{"flowsp": ms(-abandon / 2)}, want: Due{NextSchedule: -1}},
	}
	engs := make([]*Engine, len(seeds))
	for i, s := range seeds {
		engs[i] = b.eng
		if i > 0 {
			engs[i] = b.newEngine()
		}
		for suffix, score := range s.keys {
			if err := b.client.ZAdd(b.ctx, engs[i].keys.Base()+suffix, redis.Z{Score: score, Member: "m"}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dues, err := Probe(b.ctx, engs, abandon)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seeds {
		got := dues[i]
		if s.want.NextSchedule > 0 {
			// The server's clock moved on since it was read.
			if got.NextSchedule <= s.want.NextSchedule-5*time.Second || got.NextSchedule > s.want.NextSchedule {
				t.Errorf("%s: NextSchedule %v, want about %v", s.name, got.NextSchedule, s.want.NextSchedule)
			}
			got.NextSchedule = s.want.NextSchedule
		}
		if got != s.want {
			t.Errorf("%s: %+v, want %+v", s.name, got, s.want)
		}
	}
	// One engine alone, and its own expired lease, as Fetch left it.
	e := b.newEngine()
	if _, err := e.Publish(b.ctx, []Message{{ID: "a", Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Fetch(b.ctx, "c", 1, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dues, err := Probe(b.ctx, []*Engine{e}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if dues[0].Expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never showed as expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Probe(b.ctx, nil, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Probe of no engines: %v, want ErrInvalid", err)
	}
}
