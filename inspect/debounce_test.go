package inspect

import (
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// TestDebouncedTasks: on a sharded queue, a debounced task shows its key and mode in the lists of
// delayed tasks and of its partition's tasks and in Task, a plain one none; Stats sums the
// replaced and dropped publishes over the shards.
func TestDebouncedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	p0, p1 := b.onShard("p", 0), b.onShard("p", 1)
	msgOf := func(p string, key string, mode engine.DebounceMode) engine.Message {
		return engine.Message{Partition: partition.Key(p), Payload: []byte("v"), Debounce: &engine.Debounce{Key: key, Window: time.Minute, Mode: mode}}
	}
	id := b.publish(msgOf(string(p0), "k0", engine.DebounceReplace))[0]
	tid := b.publish(msgOf(string(p1), "k1", engine.Throttle))[0]
	b.publish(msg("plain", p1))
	for _, m := range []engine.Message{msgOf(string(p0), "k0", engine.DebounceReplace), msgOf(string(p1), "k1", engine.Throttle), msgOf(string(p1), "k1", engine.Throttle)} {
		if _, err := b.eng(m.Partition).Publish(b.ctx, []engine.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.in.Stats(b.ctx, b.queue)
	if err != nil {
		t.Fatal(err)
	}
	if s.Replaced != 1 || s.Dropped != 2 || s.Published != 3 {
		t.Fatalf("stats: replaced %d, dropped %d, published %d; want 1, 2, 3", s.Replaced, s.Dropped, s.Published)
	}

	delayed, err := b.in.PendingTasks(b.ctx, b.queue, TaskQuery{Delayed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(delayed.Tasks) != 1 || delayed.Tasks[0].ID != id || delayed.Tasks[0].Debounce == nil ||
		*delayed.Tasks[0].Debounce != (engine.DebounceInfo{Key: "k0", Mode: engine.DebounceReplace}) {
		t.Fatalf("delayed tasks %+v: want %s with its key k0", delayed.Tasks, id)
	}
	due, err := b.in.PartitionTasks(b.ctx, b.queue, p1, PartitionTaskQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(due.Tasks) != 2 || due.Tasks[0].ID != tid || due.Tasks[0].Debounce == nil ||
		*due.Tasks[0].Debounce != (engine.DebounceInfo{Key: "k1", Mode: engine.Throttle}) || due.Tasks[1].Debounce != nil {
		t.Fatalf("due tasks of %s %+v: want %s throttled by k1, then plain", p1, due.Tasks, tid)
	}
	task, err := b.in.Task(b.ctx, b.queue, id)
	if err != nil || task.Debounce == nil || task.Debounce.Key != "k0" {
		t.Fatalf("task %+v, %v: want its key k0", task.Debounce, err)
	}
}
