package inspect

import (
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
)

// TestWorkers: the consumers of every shard, each once with its latest heartbeat, and the record
// a running worker keeps of itself where it has one.
func TestWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	for i, e := range b.shards {
		if _, err := e.Fetch(b.ctx, "w1", 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if _, err := e.Fetch(b.ctx, "plain", 1, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	started := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	rec := engine.WorkerRecord{Host: "host-1", PID: 42, Queues: []string{b.queue, "other"}, Concurrency: 8, Running: 3,
		Started: started, Updated: time.UnixMilli(time.Now().UnixMilli())}
	if err := b.shards[1].PutWorker(b.ctx, "w1", rec); err != nil {
		t.Fatal(err)
	}
	ws, now, err := b.in.Workers(b.ctx, b.queue)
	if err != nil {
		t.Fatal(err)
	}
	if now.IsZero() || len(ws) != 2 {
		t.Fatalf("workers %+v at %v", ws, now)
	}
	byID := map[string]Worker{ws[0].Consumer: ws[0], ws[1].Consumer: ws[1]}
	w1, plain := byID["w1"], byID["plain"]
	if !w1.Known || !w1.Live || w1.Host != "host-1" || w1.PID != 42 || w1.Concurrency != 8 || w1.Running != 3 ||
		!w1.Started.Equal(started) || !slices.Equal(w1.Queues, []string{b.queue, "other"}) {
		t.Errorf("w1 %+v", w1)
	}
	if plain.Known || !plain.Live || plain.Host != "" {
		t.Errorf("a consumer without a record: %+v", plain)
	}
	if err := b.shards[1].DeleteWorker(b.ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if ws, _, err := b.in.Workers(b.ctx, b.queue); err != nil || len(ws) != 2 || ws[0].Known || ws[1].Known {
		t.Errorf("after the record's delete: %+v %v", ws, err)
	}
	if _, _, err := b.in.Workers(b.ctx, "nope"); err == nil {
		t.Error("an unknown queue has workers")
	}
}
