// Tests that show bugs found in review of flows, outcomes, cancellation, events and held
// partitions. Each fails until its bug is fixed; the comment above each says what it shows.

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// other returns a bundle on a second queue of b's client.
func (b *bundle) other(t *testing.T, suffix string) *bundle {
	t.Helper()
	e, err := New(b.client, Config{Queue: b.eng.cfg.Queue + suffix})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{t: t, ctx: b.ctx, client: b.client, eng: e, server: b.server}
}

// The ack of a step with many children in another queue must not write a message per child in
// that one call: the fan-out goes out FANOUT_CHUNK children at a time, and no call's work may grow
// with the size of a flow (docs/flows.md, "How steps are released"). The continuation of the
// fan-out is sent to the ack's own slot and applied in the same call while the budget lasts, and
// the outbox writes of the children do not count against that budget, so the whole fan-out is
// written by the ack.
func TestFlowCrossSlotFanOutIsChunked(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	o := b.other(t, "-kids")
	const n = 5000
	steps := []FlowStep{b.step("a")}
	for i := range n {
		steps = append(steps, o.step(fmt.Sprint("k", i), "a"))
	}
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "fan", Steps: steps}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Relay(b.ctx); err != nil {
		t.Fatal(err)
	}
	ds := b.fetch("c", 1)
	if len(ds) != 1 {
		t.Fatalf("fetched %d, want a", len(ds))
	}
	start := time.Now()
	b.ack(ds...)
	took := time.Since(start)
	written, err := b.client.ZCard(b.ctx, b.eng.keys.Base()+"fo").Result()
	if err != nil {
		t.Fatal(err)
	}
	if written > 1100 {
		t.Fatalf("one ack wrote %d outbox messages for a fan-out of %d (in %v): the call's work grows with the flow", written, n, took)
	}
}

// A step's parent result must be readable when the step runs: a flow keeps its steps' outcomes
// for Keep after the flow ended (docs/flows.md, "Results"). A step's outcome is kept for Keep
// after the step ended instead, so a child that runs later than that (a Delay, a slow sibling
// parent, a failed parent requeued days later) finds its parent's result gone.
func TestFlowParentResultOutlivesStepEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const keep = 300 * time.Millisecond
	later := b.step("later", "a")
	later.Message.Delay = 2 * keep
	spec := &FlowSpec{ID: "f", Keep: keep, Steps: []FlowStep{b.step("a"), later}}
	if _, err := PublishFlow(b.ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got := b.runOnce(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("ran %v, want a", got)
	}
	b.waitServerPast(b.serverNow().Add(2*keep + 50*time.Millisecond))
	// Any outcome written on the queue forgets those past their retention (a busy queue writes
	// many).
	b.publish(Message{ID: "other", KeepOutcome: time.Minute})
	if _, err := b.eng.Cancel(b.ctx, []string{"other"}, "to write an outcome"); err != nil {
		t.Fatal(err)
	}
	ds := b.fetch("c", 1)
	if len(ds) != 1 || ds[0].ID != StepID("f", "later") {
		t.Fatalf("fetched %v, want the delayed step", ds)
	}
	if f := b.flow("f"); f.State != FlowRunning {
		t.Fatalf("flow: %s, want running", f.State)
	}
	po, err := b.eng.ParentOutcome(b.ctx, ds[0].ID, "f", "a")
	if err != nil || string(po.Result) != "result of a" {
		t.Fatalf("the running step's parent a: %+v, %v; the flow is running, its result must be kept", po, err)
	}
}

// RecoverFlows reads the publishes that began before the timeout and then undoes each. A
// publisher that commits in between (slow, not dead) has its flow running: the undo must then
// leave it alone. It deletes the flow's waiting steps instead, and the running flow never
// completes.
func TestFlowRecoverRacingCommitKeepsRunningFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	o := b.other(t, "-other")
	spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a"), o.step("c")}}
	p, err := planFlow(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.run(b.ctx, scriptFlowPub, "claim", "f", 60000, p.def, "a", "b", "c"); err != nil {
		t.Fatal(err)
	}
	for _, base := range p.bases {
		args := []any{"part", "f", 60000, b.eng.keys.Base()}
		for _, i := range p.groups[base] {
			args = p.stepArgs(args, i)
		}
		if _, err := p.engs[base].run(b.ctx, scriptFlowPub, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The recoverer's client commits the flow (as its publisher does, on another connection) right
	// after the recoverer listed it as unfinished, before it reads its definition.
	rc := b.server.Client(t)
	var commit any
	rc.AddHook(commitBefore{fd: b.eng.keys.Base() + "fd:f", commit: func(ctx context.Context) {
		commit, err = b.eng.run(ctx, scriptFlowPub, "commit", "f", p.bases[0], p.bases[1])
	}})
	rec, err2 := New(rc, b.eng.cfg)
	if err2 != nil {
		t.Fatal(err2)
	}
	if _, err := rec.RecoverFlows(b.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err != nil || commit != int64(codeOK) {
		t.Fatalf("commit: %v, %v", commit, err)
	}
	// The commit succeeded: the publisher reports the flow published. It must run whole.
	for range 3 {
		b.runOnce()
		o.runOnce()
		b.eng.Relay(b.ctx)
		o.eng.Relay(b.ctx)
	}
	f := b.flow("f")
	if f.State != FlowCompleted {
		t.Fatalf("a committed flow after RecoverFlows: %s, steps %+v", f.State, f.Steps)
	}
}

// commitBefore runs commit once, before the first GET of key fd.
type commitBefore struct {
	fd     string
	commit func(context.Context)
}

func (h commitBefore) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h commitBefore) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h commitBefore) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	done := false
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); !done && len(a) == 2 && strings.EqualFold(fmt.Sprint(a[0]), "get") && a[1] == h.fd {
			done = true
			h.commit(ctx)
		}
		return next(ctx, cmd)
	}
}

// A publish of a flow over several slots whose first call (the claim) lost its reply fails; the
// caller publishes again to find out, and "a duplicate means it does" exist (PublishFlow). The
// claim ran, so the second publish reports a duplicate; but no publisher will ever commit that
// claim: the flow stays "publishing" and RecoverFlows undoes it, so nothing of it ever runs.
func TestFlowLostClaimReplyIsNoDuplicate(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "a script on the server's own thread keeps every client waiting")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := srv.Client(t)
	opt := srv.Options()
	opt.ReadTimeout, opt.MaxRetries = 100*time.Millisecond, -1
	short := redis.NewClient(opt)
	t.Cleanup(func() { _ = short.Close() })
	popt := srv.Options()
	popt.ReadTimeout, popt.MaxRetries = 20*time.Millisecond, -1
	probe := redis.NewClient(popt)
	t.Cleanup(func() { _ = probe.Close() })

	qa, qb := redistest.Queue(t), redistest.Queue(t)+"-b"
	engines := func(c *redis.Client) (*Engine, *Engine) {
		a, err := New(c, Config{Queue: qa})
		if err != nil {
			t.Fatal(err)
		}
		bb, err := New(c, Config{Queue: qb})
		if err != nil {
			t.Fatal(err)
		}
		return a, bb
	}
	spec := func(id string, a, bb *Engine) *FlowSpec {
		return &FlowSpec{ID: id, Steps: []FlowStep{
			{Name: "a", Engine: a, Message: Message{Payload: []byte("a")}},
			{Name: "b", Engine: bb, Message: Message{Payload: []byte("b")}, After: []FlowEdge{{Parent: "a"}}},
		}}
	}
	sa, sb := engines(short)
	aa, ab := engines(admin)
	if err := aa.LoadScripts(ctx); err != nil { // else the claim, run late, would meet NOSCRIPT
		t.Fatal(err)
	}
	lost := 0
	for round := range 10 {
		id := fmt.Sprint("f", round)
		warm(ctx, t, short, 2)
		done := blockRedis(ctx, t, admin, probe, 300*time.Millisecond)
		_, err := PublishFlow(ctx, spec(id, sa, sb))
		<-done
		if !errors.Is(err, ErrReplyLost) {
			continue // the server answered in time
		}
		lost++
		dup, err := PublishFlow(ctx, spec(id, aa, ab))
		if err != nil {
			t.Fatal(err)
		}
		if !dup {
			continue // the lost call wrote no claim (or wrote it after this one): published now
		}
		f, err := aa.Flow(ctx, id)
		if err != nil || f.State == FlowPublishing {
			t.Fatalf("round %d: publish again reported a duplicate, but the flow is %q (%v): no publisher will commit it, RecoverFlows undoes it, and it never runs", round, f.State, err)
		}
	}
	if lost == 0 {
		t.Fatal("no publish lost its reply: the server was never busy long enough to test anything")
	}
}

// A relay engine learns whether the queue it delivers to keeps an event stream once, at its
// first delivery. A queue whose worker announces its stream later (it started after the first
// relay to it) never gets the events of what other processes' relays do there: the released
// steps, the flow's completion.
func TestRelayLearnsEventsAnnouncedLater(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	o := b.other(t, "-ev")
	spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), o.step("b", "a"), o.step("c", "a")}}
	if _, err := PublishFlow(b.ctx, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Relay(b.ctx); err != nil { // the gates of b's queue: the relay meets it
		t.Fatal(err)
	}
	// The other queue's worker starts now, with an event stream.
	withEvents, err := New(b.client, Config{Queue: o.eng.cfg.Queue, Events: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := withEvents.AnnounceEvents(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.runOnce()
	if _, err := b.eng.Relay(b.ctx); err != nil { // releases b and c there
		t.Fatal(err)
	}
	evs, err := withEvents.Events(b.ctx, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, ev := range evs {
		if ev.Kind == EventReleased {
			released++
		}
	}
	if released != 2 {
		t.Fatalf("the queue's stream has %d released events, want 2 (b and c): %+v", released, evs)
	}
}

// An ordered partition that holds on a dead letter: a worker leased a run of two and died; both
// leases expire at their last attempt, so recovery dead-letters both. The first dies first and
// holds the partition; the second's death then takes the hold over. A requeue of the first, the
// earlier event, no longer finds it holding: it goes behind the partition's tasks rather than to
// its own place, and once the second is requeued too (to its own place, the head) the second
// runs before the first.
func TestHoldByRecoveredRunKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("ledger")
	ids := b.publish(Message{ID: "e1", Partition: p, MaxAttempts: 1, HoldOnDead: true},
		Message{ID: "e2", Partition: p, MaxAttempts: 1, HoldOnDead: true},
		Message{ID: "e3", Partition: p, HoldOnDead: true})
	run, err := b.eng.Fetch(b.ctx, "dead-worker", 2, shortLease)
	if err != nil || len(run) != 2 {
		t.Fatalf("fetch: %v, %v", run, err)
	}
	b.expire(run)
	if r, err := b.eng.RecoverAll(b.ctx); err != nil || r.DeadLettered == 0 {
		t.Fatalf("recover: %+v, %v", r, err)
	}
	// The operator requeues the dead letters, the first event first.
	for _, id := range ids[:2] {
		if errs, err := b.eng.Requeue(b.ctx, []string{id}); err != nil || errs[0] != nil && !errors.Is(errs[0], ErrNotDead) {
			t.Fatalf("requeue %s: %v, %v", id, errs, err)
		}
	}
	got := b.drain("c")
	if strings.Join(got, " ") != "e1 e2 e3" {
		t.Fatalf("after requeueing both dead letters ran %v, want e1 e2 e3", got)
	}
}

// A first step of a flow whose publish has not committed yet is cancelled (Queue.Cancel of its
// id). Its note makes the flow's record "failed" at the home, over its "publishing": the commit
// then fails (ErrFlowAborted), and the publisher's undo, which removes the claim only of a flow
// still being published, leaves the record, the definition and the entry in flowsp for good. The
// id can never be published again, and every RecoverFlows round undoes the flow again.
func TestFlowCancelDuringPublishLeavesNoClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	o := b.other(t, "-other")
	spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), o.step("b")}}
	p, err := planFlow(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.run(b.ctx, scriptFlowPub, "claim", "f", 60000, p.def, "a", "b"); err != nil {
		t.Fatal(err)
	}
	written := map[string][]string{}
	for _, base := range p.bases {
		args := []any{"part", "f", 60000, b.eng.keys.Base()}
		for _, i := range p.groups[base] {
			args = p.stepArgs(args, i)
			written[base] = append(written[base], p.ids[i])
		}
		if _, err := p.engs[base].run(b.ctx, scriptFlowPub, args...); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := b.eng.Cancel(b.ctx, []string{StepID("f", "a")}, "not wanted"); err != nil || res[0].Err != nil {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	res, err := b.eng.run(b.ctx, scriptFlowPub, "commit", "f", p.bases[0], p.bases[1])
	if err != nil {
		t.Fatal(err)
	}
	_, cerr := p.result(res)
	aborted := errors.Is(cerr, ErrFlowAborted)
	if aborted {
		if err := p.abort(b.ctx, written, true); err != nil { // the publisher's undo
			t.Fatal(err)
		}
	}
	prep, err := b.client.ZCard(b.ctx, b.eng.keys.Base()+"flowsp").Result()
	if err != nil {
		t.Fatal(err)
	}
	f, ferr := b.eng.Flow(b.ctx, "f")
	switch {
	case aborted && (prep != 0 || !errors.Is(ferr, ErrNotFound)):
		t.Fatalf("after the aborted commit and the undo: %d flows being published, flow %q (%v); want nothing left", prep, f.State, ferr)
	case !aborted && (cerr != nil || prep != 0 || f.State != FlowFailed):
		t.Fatalf("after the commit (%v): %d flows being published, flow %q (%v); want it failed by its cancelled step", cerr, prep, f.State, ferr)
	}
}
