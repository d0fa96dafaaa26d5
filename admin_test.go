package srq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/srqueue/srq"
)

// The typed queue reaches its dead letters on every shard: list, decode, requeue, purge.
func TestQueueDeadLettersOverShards(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{Shards: 4})
	for i := range 12 {
		if _, err := q.Publish(ctx, order{User: "u", Seq: i}, &srq.PublishOpts{Partition: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	fail := true
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		if fail {
			return srq.Permanent(errors.New("no"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n > 0; {
		if n, err = w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	page, err := q.DeadLetters(ctx, srq.DeadQuery{Limit: 100})
	if err != nil || len(page.Letters) != 12 {
		t.Fatalf("dead letters: %d, %v", len(page.Letters), err)
	}
	shards := map[int]bool{}
	var ids []string
	for _, l := range page.Letters {
		shards[l.Shard] = true
		v, err := q.Decode(l.Payload)
		if err != nil || v.User != "u" || l.Error != "no" {
			t.Fatalf("letter %s: %+v, %v, %q", l.ID, v, err, l.Error)
		}
		ids = append(ids, l.ID)
	}
	if len(shards) < 2 {
		t.Fatalf("letters of %d shards", len(shards))
	}
	fail = false
	if n, err := q.Requeue(ctx, ids[:6]...); err != nil || n != 6 {
		t.Fatalf("Requeue: %d, %v", n, err)
	}
	if n, err := q.Purge(ctx, append(ids[6:], "unknown")...); err != nil || n != 6 {
		t.Fatalf("Purge: %d, %v", n, err)
	}
	for n := 1; n > 0; {
		if n, err = w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Dead != 0 || st.Acked != 6 || st.Requeued != 6 || st.Purged != 6 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// DeadQuery.Partition is the key as stored: an ordered partition's starts with "!" (errors.md).
func TestDeadQueryOrderedPartitionKey(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{})
	res, err := q.Publish(ctx, order{User: "42", Seq: 1}, &srq.PublishOpts{Partition: "42", Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		return srq.Permanent(errors.New("no"))
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"!42": 1, "42": 0} {
		page, err := q.DeadLetters(ctx, srq.DeadQuery{Partition: key})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Letters) != want || (want == 1 && (page.Letters[0].ID != res.ID || page.Letters[0].Partition != "!42")) {
			t.Errorf("DeadQuery{Partition: %q}: %+v, want %d letter(s)", key, page.Letters, want)
		}
	}
}

// Purge fails as Requeue does for an invalid id: ErrInvalid, nothing sent.
func TestPurgeInvalidID(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{Shards: 2})
	for _, id := range []string{"", strings.Repeat("x", 300)} {
		if _, err := q.Requeue(ctx, id); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Requeue(%.10q…): %v, want ErrInvalid", id, err)
		}
		if n, err := q.Purge(ctx, "ok", id); n != 0 || !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("Purge(%.10q…): %d, %v, want ErrInvalid", id, n, err)
		}
	}
}
