package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// mergeSeed publishes the same tasks, with the same ids, to b's queue: 12 over three unordered
// and two ordered partitions.
func mergeSeed(b *bundle) {
	b.t.Helper()
	var msgs []Message
	for i := range 12 {
		p := partition.Key(fmt.Sprintf("u%d", i%3))
		if i%4 == 3 {
			p = partition.Ordered(fmt.Sprintf("o%d", i%2))
		}
		msgs = append(msgs, Message{ID: fmt.Sprintf("t%02d", i), Partition: p, Payload: []byte{byte(i)}})
	}
	b.publish(msgs...)
}

// mergeIDs returns the ids of ds.
func mergeIDs(ds []Delivery) []string {
	ids := make([]string, len(ds))
	for i := range ds {
		ids[i] = ds[i].ID
	}
	return ids
}

// TestMergedCallMatchesSeparateCalls: a merged call of several callers' acks and fetches gives
// each caller what separate calls give in the order the merged call promises: every ack first,
// then each fetch in order of arrival. Two queues get the same tasks; one serves each round with
// separate calls (ack.lua, then fetch.lua per consumer), the other with one merged call
// (ack_fetch.lua with several fetches). Each round's consumers ack what they got the round
// before: with their fetch, or on even rounds the last one's in an Ack of its own; in round 3 one
// of them also sends a stale token.
func TestMergedCallMatchesSeparateCalls(t *testing.T) {
	t.Parallel()
	alone, merged := setup(t, Config{MaxOrderedRun: 2}), setup(t, Config{MaxOrderedRun: 2})
	mergeSeed(alone)
	mergeSeed(merged)
	consumers := []string{"c0", "c1", "c2"}
	held := map[*bundle]map[string][]Receipt{alone: {}, merged: {}} // what each consumer acks next
	// callers returns one round's calls on b's queue, in order of arrival.
	callers := func(b *bundle, round int) []*op {
		var ops []*op
		for i, c := range consumers {
			o := &op{ctx: b.ctx, consumer: c, n: 1 + i, run: 2, lease: time.Minute, acks: held[b][c]}
			if round == 3 && i == 1 && len(o.acks) > 0 {
				o.acks = append(slices.Clone(o.acks), Receipt{ID: o.acks[0].ID, Token: o.acks[0].Token + 1})
			}
			if round%2 == 0 && i == len(consumers)-1 {
				ops = append(ops, &op{ctx: b.ctx, acks: o.acks})
				o.acks = nil
			}
			ops = append(ops, o)
		}
		return ops
	}
	for round := range 10 {
		ops, seps := callers(merged, round), callers(alone, round)
		merged.eng.sendCalls(ops)

		// The separate calls: one Ack of every caller's acks, then each fetch alone.
		var acks []Receipt
		for _, s := range seps {
			acks = append(acks, s.acks...)
		}
		ackOp := &op{ctx: alone.ctx, acks: acks}
		if len(acks) > 0 {
			alone.eng.sendCalls([]*op{ackOp})
		}
		codes := ackOp.errs
		for i, s := range seps {
			o := ops[i]
			if o.err != nil || ackOp.err != nil {
				t.Fatalf("round %d caller %d: merged %v, separate ack %v", round, i, o.err, ackOp.err)
			}
			if len(o.errs) != len(o.acks) || !slices.EqualFunc(o.errs, codes[:len(o.acks)], func(a, b error) bool { return errors.Is(a, b) }) {
				t.Fatalf("round %d caller %d: merged ack results %v, separate %v", round, i, o.errs, codes[:len(o.acks)])
			}
			codes = codes[len(o.acks):]
			if o.consumer == "" {
				continue
			}
			s.acks = nil // acked above
			alone.eng.sendCalls([]*op{s})
			if s.err != nil {
				t.Fatalf("round %d %s: separate fetch: %v", round, s.consumer, s.err)
			}
			if got, want := mergeIDs(o.ds), mergeIDs(s.ds); !slices.Equal(got, want) {
				t.Fatalf("round %d %s: merged fetch %v, separate %v", round, o.consumer, got, want)
			}
			if o.nextDue != s.nextDue {
				t.Fatalf("round %d %s: merged next due %v, separate %v", round, o.consumer, o.nextDue, s.nextDue)
			}
			held[merged][o.consumer], held[alone][s.consumer] = receiptsOf(o.ds), receiptsOf(s.ds)
		}
		// Every lease of the merged call is its own caller's.
		leases, _, err := merged.eng.InFlight(merged.ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases {
			for _, o := range ops {
				if slices.Contains(mergeIDs(o.ds), l.ID) && l.Consumer != o.consumer {
					t.Fatalf("round %d: task %s fetched by %s is leased to %s", round, l.ID, o.consumer, l.Consumer)
				}
			}
		}
	}
	for _, b := range []*bundle{alone, merged} {
		st, err := b.eng.Stats(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending != 0 || st.InFlight != 0 || st.Acked != 12 {
			t.Fatalf("queue %s after the rounds: %+v, want every task acked", b.eng.cfg.Queue, st)
		}
	}
}

func receiptsOf(ds []Delivery) []Receipt {
	rs := make([]Receipt, len(ds))
	for i := range ds {
		rs[i] = ds[i].Receipt()
	}
	return rs
}

// TestMergedAcksOfOneTask: two callers ack the same delivery in one merged call; the first acks
// it and the second finds it gone, as two separate calls would.
func TestMergedAcksOfOneTask(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a"}, Message{ID: "b"})
	ds := b.fetch("c", 2)
	first := &op{ctx: b.ctx, acks: receiptsOf(ds)}
	second := &op{ctx: b.ctx, acks: receiptsOf(ds[:1])}
	b.eng.sendCalls([]*op{first, second})
	if first.err != nil || second.err != nil {
		t.Fatalf("merged acks: %v, %v", first.err, second.err)
	}
	if first.errs[0] != nil || first.errs[1] != nil || !errors.Is(second.errs[0], ErrNotFound) {
		t.Fatalf("merged acks: first %v, second %v; want nil nil, then ErrNotFound", first.errs, second.errs)
	}
}

// TestMergeWaitingCallerLeavesOnCancel: a call waiting for the call in flight leaves when its
// context ends, with the context's error and without being sent.
func TestMergeWaitingCallerLeavesOnCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a"})
	b.eng.calls.mu.Lock()
	b.eng.calls.busy = mergeInFlight // every call slot taken: the next caller waits
	b.eng.calls.mu.Unlock()
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	if _, err := b.eng.Fetch(ctx, "c", 1, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch while waiting, context cancelled: %v; want context.Canceled", err)
	}
	b.eng.calls.mu.Lock()
	waiting, busy := len(b.eng.calls.waiting), b.eng.calls.busy
	b.eng.calls.busy = 0
	b.eng.calls.mu.Unlock()
	if waiting != 0 || busy != mergeInFlight {
		t.Fatalf("after leaving: %d waiting, %d busy; want 0 and %d", waiting, busy, mergeInFlight)
	}
	if ds := b.fetch("c", 1); len(ds) != 1 || ds[0].ID != "a" || ds[0].Attempt != 1 {
		t.Fatalf("fetch after the cancelled one: %+v; want task a, first attempt", ds)
	}
}

// TestMergeLeadSkipsEndedContexts: a batch's call leaves out the callers whose context ended
// while they waited, sends the others, hands the next batch to the first waiting caller, and
// tells the rest of the batch that their results are in.
func TestMergeLeadSkipsEndedContexts(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a"}, Message{ID: "b"}, Message{ID: "c"})
	gone, cancel := context.WithCancel(b.ctx)
	cancel()
	mk := func(ctx context.Context, consumer string) *op {
		return &op{ctx: ctx, consumer: consumer, n: 1, run: 1, lease: time.Minute, turn: make(chan []*op, 1)}
	}
	lead, left, other, next := mk(b.ctx, "c1"), mk(gone, "c2"), mk(b.ctx, "c3"), mk(b.ctx, "c4")
	m := &b.eng.calls
	m.mu.Lock()
	m.busy = 1 // the batch's own call
	m.waiting = []*op{next}
	m.mu.Unlock()

	b.eng.calls.lead([]*op{lead, left, other}, true)

	if lead.err != nil || other.err != nil || len(lead.ds) != 1 || len(other.ds) != 1 {
		t.Fatalf("the live callers: %v %v, %d and %d tasks; want a task each", lead.err, other.err, len(lead.ds), len(other.ds))
	}
	if !errors.Is(left.err, context.Canceled) || left.ds != nil {
		t.Fatalf("the caller that left: %v, %d tasks; want context.Canceled and none", left.err, len(left.ds))
	}
	for _, o := range []*op{left, other} {
		if batch := <-o.turn; batch != nil {
			t.Fatalf("%s was handed a batch to send; want its results", o.consumer)
		}
	}
	if batch := <-next.turn; len(batch) != 1 || batch[0] != next {
		t.Fatalf("the waiting caller got %v; want its own batch to send", batch)
	}
	m.mu.Lock()
	busy, waiting := m.busy, len(m.waiting)
	m.mu.Unlock()
	if busy != 1 || waiting != 0 {
		t.Fatalf("after the hand-over: %d busy, %d waiting; want the next batch's call and none", busy, waiting)
	}
}

// TestMergeNext: a batch is the waiting calls in order, at most MaxMerge of them, that carry at
// most mergeMaxTasks tasks together, to fetch, ack or publish, and at most mergeMaxBytes bytes to
// publish; a larger first call goes alone.
func TestMergeNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		max   int
		ns    []int // the waiting calls' fetch sizes (0: an Ack)
		acks  []int // their acks, where given
		bytes []int // the bytes they publish, where given
		batch int   // how many of them the next batch takes
	}{
		{"none waiting", 4, nil, nil, nil, 0},
		{"all", 4, []int{5, 0, 5}, nil, nil, 3},
		{"max calls", 2, []int{5, 5, 5}, nil, nil, 2},
		{"max tasks", 8, []int{600, 400, 1}, nil, nil, 2},
		{"over max tasks", 8, []int{600, 401, 1}, nil, nil, 1},
		{"acks count", 8, []int{5, 0, 5}, []int{5, 985, 1}, nil, 2},
		{"max bytes", 8, []int{1, 1, 1}, nil, []int{mergeMaxBytes / 2, mergeMaxBytes / 2, 1}, 2},
		{"large first alone", 8, []int{5000, 1}, nil, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &merger{busy: 1, max: tc.max}
			for i, n := range tc.ns {
				o := &op{n: n}
				if i < len(tc.acks) {
					o.acks = make([]Receipt, tc.acks[i])
				}
				if i < len(tc.bytes) {
					o.bytes = tc.bytes[i]
				}
				m.waiting = append(m.waiting, o)
			}
			want := slices.Clone(m.waiting[:tc.batch])
			got := m.next()
			if !slices.Equal(got, want) {
				t.Fatalf("batch of %d; want %d", len(got), tc.batch)
			}
			if len(m.waiting) != len(tc.ns)-tc.batch {
				t.Fatalf("%d left waiting; want %d", len(m.waiting), len(tc.ns)-tc.batch)
			}
			wantBusy := 1
			if tc.batch == 0 {
				wantBusy = 0
			}
			if m.busy != wantBusy {
				t.Fatalf("busy %d; want %d", m.busy, wantBusy)
			}
		})
	}
}

// errNoServer is the error of every dial of a noServer client.
var errNoServer = errors.New("no server: this client never connects")

// noServer returns a client whose every dial fails at once with errNoServer, without a network
// dial, closed when t ends.
func noServer(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: "no-server:6379", MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return nil, errNoServer }})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestMergedCallFailureReachesEveryCaller: when a merged call fails, every caller in it gets the
// error, for acks and fetches and for publishes.
func TestMergedCallFailureReachesEveryCaller(t *testing.T) {
	t.Parallel()
	e, err := New(noServer(t), Config{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ops := []*op{
		{ctx: ctx, acks: []Receipt{{ID: "a", Token: 1}}},
		{ctx: ctx, consumer: "c", n: 2, run: 2, lease: time.Minute},
		{ctx: ctx, acks: []Receipt{{ID: "b", Token: 2}}, consumer: "d", n: 1, run: 1, lease: time.Minute},
	}
	e.sendCalls(ops)
	for i, o := range ops {
		if o.err == nil || o.errs != nil || o.ds != nil {
			t.Fatalf("caller %d: %v, %v, %v; want the call's error alone", i, o.err, o.errs, o.ds)
		}
	}
	pubs := []*op{
		{ctx: ctx, msgs: []any{"a", "", "0", int64(0), int64(0), 0, "", []byte("x"), "", ""}},
		{ctx: ctx, msgs: []any{"b", "", "0", int64(0), int64(0), 0, "", []byte("y"), "", ""}},
	}
	e.sendPublishes(pubs)
	for i, o := range pubs {
		if o.err == nil || dupsOf(o) != nil {
			t.Fatalf("publisher %d: %v, %v; want the call's error alone", i, o.err, dupsOf(o))
		}
	}
}

// TestMergeConcurrentConsumers: consumers acking and fetching at once, through merged calls or
// not (MaxMerge 1), get every task exactly once, each ordered partition's in order.
func TestMergeConcurrentConsumers(t *testing.T) {
	t.Parallel()
	mergedOrNot(t, func(t *testing.T, b *bundle) {
		const tasks, parts = 600, 12
		var msgs []Message
		for i := range tasks {
			p := partition.Key(fmt.Sprintf("u%d", i%parts))
			if i%parts < parts/2 {
				p = partition.Ordered(fmt.Sprintf("o%d", i%parts))
			}
			msgs = append(msgs, Message{ID: fmt.Sprintf("t%04d", i), Partition: p})
		}
		for i := 0; i < tasks; i += 100 {
			b.publish(msgs[i : i+100]...)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		last := map[partition.Key]string{} // the last task id acked per ordered partition
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for c := range 8 {
			wg.Go(func() {
				consumer := fmt.Sprintf("c%d", c)
				var rs []Receipt
				for {
					acks, ds, _, err := b.eng.AckFetch(b.ctx, rs, consumer, 5, time.Minute)
					if err == nil {
						for i, e := range acks {
							if e != nil {
								err = fmt.Errorf("ack %s: %w", rs[i].ID, e)
							}
						}
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for _, d := range ds {
						seen[d.ID]++
						if d.Partition.IsOrdered() {
							if prev := last[d.Partition]; prev > d.ID {
								err = fmt.Errorf("partition %s: %s after %s", d.Partition, d.ID, prev)
							}
							last[d.Partition] = d.ID
						}
					}
					done := len(seen) == tasks
					mu.Unlock()
					if err != nil {
						errs <- err
						return
					}
					rs = receiptsOf(ds)
					if len(ds) == 0 && done {
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("task %s delivered %d times", id, n)
			}
		}
		st, err := b.eng.Stats(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != tasks || st.Pending != 0 || st.InFlight != 0 || st.Acked != tasks {
			t.Fatalf("%d tasks seen; stats %+v; want all %d acked", len(seen), st, tasks)
		}
	})
}

// panicHook makes every command of a client panic.
type panicHook struct{}

func (panicHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (panicHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error { panic("boom") }
}
func (panicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hookedBatch returns an engine whose client runs hook on every command, a batch of two fetches
// (lead sends it, other is in it) with one more fetch (next) waiting behind it.
func hookedBatch(t *testing.T, hook redis.Hook) (e *Engine, lead, other, next *op) {
	t.Helper()
	client := noServer(t)
	client.AddHook(hook)
	e, err := New(client, Config{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *op {
		return &op{ctx: t.Context(), consumer: "c", n: 1, run: 1, lease: time.Minute, turn: make(chan []*op, 1)}
	}
	lead, other, next = mk(), mk(), mk()
	e.calls.busy, e.calls.waiting = 1, []*op{next}
	return e, lead, other, next
}

// checkHandedOver checks that a batch's sender told other, in its batch, that its results (an
// error) are in, and handed the next batch to next.
func checkHandedOver(t *testing.T, other, next *op) {
	t.Helper()
	if <-other.turn != nil || other.err == nil {
		t.Fatalf("the other caller: %v; want an error and its results", other.err)
	}
	if batch := <-next.turn; len(batch) != 1 || batch[0] != next {
		t.Fatalf("the waiting caller got %v; want its own batch to send", batch)
	}
}

// TestMergeLeadPanicHandsOver: a panic in a merged call reaches the caller that sent it, and
// still gives the other callers in it an error and the next waiting caller its batch.
func TestMergeLeadPanicHandsOver(t *testing.T) {
	t.Parallel()
	e, lead, other, next := hookedBatch(t, panicHook{})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v; want the call's panic", r)
			}
		}()
		e.calls.lead([]*op{lead, other}, true)
	}()
	checkHandedOver(t, other, next)
}

// TestMergedPublishes: publishes merged into one call add every caller's messages in order of
// arrival, and a repeat of an id in a later caller's messages is its duplicate, as with separate
// calls.
func TestMergedPublishes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	pub := func(ids ...string) *op {
		o := &op{ctx: b.ctx}
		for _, id := range ids {
			o.msgs, _ = messageArgs(o.msgs, id, &Message{Payload: []byte(id)})
		}
		return o
	}
	ops := []*op{pub("a", "b"), pub("c"), pub("b", "d")}
	b.eng.sendPublishes(ops)
	want := [][]bool{{false, false}, {false}, {true, false}}
	for i, o := range ops {
		if o.err != nil || !slices.Equal(dupsOf(o), want[i]) {
			t.Fatalf("caller %d: %v, duplicates %v; want %v", i, o.err, dupsOf(o), want[i])
		}
	}
	var got []string
	for _, d := range b.fetch("c", 10) {
		got = append(got, d.ID+"="+string(d.Payload))
	}
	if want := []string{"a=a", "b=b", "c=c", "d=d"}; !slices.Equal(got, want) {
		t.Fatalf("fetched %v; want %v", got, want)
	}
}

// TestMergeConcurrentPublishers: producers publishing at once, through merged calls or not, add
// every message exactly once.
func TestMergeConcurrentPublishers(t *testing.T) {
	t.Parallel()
	mergedOrNot(t, func(t *testing.T, b *bundle) {
		const producers, each = 8, 50
		b.publishConcurrently(producers, each, func(g, i int) Message {
			return Message{ID: fmt.Sprintf("p%d-%03d", g, i), Partition: partition.Key(fmt.Sprint("u", i%4))}
		})
		st, err := b.eng.Stats(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Published != producers*each || st.Pending != producers*each || st.Duplicates != 0 {
			t.Fatalf("stats %+v; want %d published and pending", st, producers*each)
		}
	})
}

// TestMergeAckCallerLeavesOnceTaken: a caller whose context ends after its call was taken into a
// batch, but before the batch is sent, returns at once with its context's error and nothing of its
// call is sent; the batch, handed to it to send, is still sent for the other callers in it.
func TestMergeAckCallerLeavesOnceTaken(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a"}, Message{ID: "b"})
	ds := b.fetch("c", 1)
	ctx, cancel := context.WithCancel(b.ctx)
	batch, left := queuedAck(t, b, ctx, receiptsOf(ds))
	cancel()
	if r := <-left; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Ack after its context ended: %v; want context.Canceled", r.err)
	}
	other := &op{ctx: b.ctx, consumer: "d", n: 1, run: 1, lease: time.Minute, turn: make(chan []*op, 1)}
	batch[0].turn <- append(batch, other) // the batch, with one more caller in it, is the Ack's to send
	if got := <-other.turn; got != nil || other.err != nil || len(other.ds) != 1 || other.ds[0].ID != "b" {
		t.Fatalf("the other caller: %v, %v, %+v; want task b", got, other.err, other.ds)
	}
	if st, err := b.eng.Stats(b.ctx); err != nil || st.Acked != 0 || st.InFlight != 2 {
		t.Fatalf("stats %+v, %v; want the left Ack not sent, both tasks leased", st, err)
	}
}

// TestCallContext: a call of one caller that does not fetch runs on its caller's context; a call
// that fetches has no deadline and is not cancelled; a merged call of acks or publishes has the
// latest deadline of its callers when each has one, else none, and is not cancelled.
func TestCallContext(t *testing.T) {
	t.Parallel()
	soon, late := time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	ctxA, cancelA := context.WithDeadline(t.Context(), soon)
	defer cancelA()
	ctxB, cancelB := context.WithDeadline(t.Context(), late)
	defer cancelB()
	ops := []*op{{ctx: ctxA}, {ctx: ctxB}}

	alone, done := callContext(ops[:1], false)
	defer done()
	if alone != ctxA {
		t.Fatal("the call of one caller does not run on its context")
	}
	fetching, done := callContext(ops, true)
	defer done()
	if _, ok := fetching.Deadline(); ok {
		t.Fatal("a call that fetches has a deadline")
	}
	merged, done := callContext(ops, false)
	defer done()
	if d, ok := merged.Deadline(); !ok || !d.Equal(late) {
		t.Fatalf("merged call's deadline %v, %v; want the latest, %v", d, ok, late)
	}
	open, done := callContext([]*op{{ctx: ctxA}, {ctx: t.Context()}}, false)
	defer done()
	if _, ok := open.Deadline(); ok {
		t.Fatal("a merged call has a deadline though one of its callers has none")
	}
	cancelA()
	cancelB()
	if fetching.Err() != nil || merged.Err() != nil || open.Err() != nil {
		t.Fatal("a call was cut off by its callers' cancellation")
	}
}

// TestMergeSentCallerWaits: a caller whose context ends after its call was sent waits for the
// call, which still reads its receipts, and gets the call's results.
func TestMergeSentCallerWaits(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a"}, Message{ID: "b"})
	ds := b.fetch("c", 1)
	m := &b.eng.calls
	ctx, cancel := context.WithCancel(b.ctx)
	taken, acked := queuedAck(t, b, ctx, receiptsOf(ds))
	// Another caller sends the batch with the Ack in it, and is held inside the call.
	sender := &op{ctx: b.ctx, consumer: "d", n: 1, run: 1, lease: time.Minute}
	entered, proceed, led := make(chan struct{}), make(chan struct{}), make(chan struct{})
	send := m.send
	m.send = func(ops []*op) {
		close(entered)
		<-proceed
		send(ops)
	}
	go func() {
		m.lead([]*op{sender, taken[0]}, true)
		close(led)
	}()
	<-entered
	cancel()
	select {
	case r := <-acked:
		t.Fatalf("the Ack returned %v while its call was in flight", r.err)
	case <-time.After(50 * time.Millisecond): // time for a wrongly leaving caller to leave
	}
	close(proceed)
	<-led
	r := <-acked
	if r.err != nil || len(r.errs) != 1 || r.errs[0] != nil || sender.err != nil || len(sender.ds) != 1 {
		t.Fatalf("Ack: %v, %v; sender: %v, %d tasks; want the ack done and task b fetched", r.errs, r.err, sender.err, len(sender.ds))
	}
}

// goexitHook makes every command of a client end its goroutine.
type goexitHook struct{ panicHook }

func (goexitHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error {
		runtime.Goexit()
		return nil
	}
}

// TestMergeLeadGoexitHandsOver: a call whose goroutine exits (runtime.Goexit) still gives the
// other callers in it an error and the next waiting caller its batch.
func TestMergeLeadGoexitHandsOver(t *testing.T) {
	t.Parallel()
	e, lead, other, next := hookedBatch(t, goexitHook{})
	go e.calls.lead([]*op{lead, other}, true)
	checkHandedOver(t, other, next)
}

// ackResult is what an Ack call returned.
type ackResult struct {
	errs []error
	err  error
}

// queuedAck starts Ack(ctx, rs) on b's engine while both of its call slots are taken, waits until
// the Ack is queued, and takes it off the queue as the batch to send next, as a call that returned
// would. The Ack's result comes on the channel.
func queuedAck(t *testing.T, b *bundle, ctx context.Context, rs []Receipt) ([]*op, <-chan ackResult) {
	t.Helper()
	m := &b.eng.calls
	m.mu.Lock()
	m.busy = mergeInFlight
	m.mu.Unlock()
	acked := make(chan ackResult, 1)
	go func() {
		errs, err := b.eng.Ack(ctx, rs)
		acked <- ackResult{errs, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the Ack never queued")
		}
		m.mu.Lock()
		queued := len(m.waiting) == 1
		m.mu.Unlock()
		if queued {
			return m.next(), acked
		}
	}
}

// mergedOrNot runs f as parallel subtests on a fresh queue whose engine sends every call alone
// (MaxMerge 1) and on one that merges them (the default).
func mergedOrNot(t *testing.T, f func(t *testing.T, b *bundle)) {
	for _, maxMerge := range []int{1, DefaultMaxMerge} {
		t.Run(fmt.Sprintf("max-merge-%d", maxMerge), func(t *testing.T) {
			t.Parallel()
			f(t, setup(t, Config{MaxMerge: maxMerge}))
		})
	}
}

// dupsOf is whether each message of publish op o was a duplicate; nil when it has no results.
func dupsOf(o *op) []bool {
	if o.pubs == nil {
		return nil
	}
	out := make([]bool, len(o.pubs))
	for i, r := range o.pubs {
		out[i] = r.code == codeDuplicate
	}
	return out
}
