// Tests of edge cases of flows, outcomes, cancellation, events and held partitions, each of which
// once failed: the comment above each says what it holds srq to.

package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// The ack of a step with many children in another queue does not write a message per child in
// that one call: every message counts against the call's budget, and once it is spent the fan-out
// goes on in later calls, so no call's work grows with the size of a flow (docs/flows.md, "How
// steps are released").
func TestFlowCrossSlotFanOutIsChunked(t *testing.T) {
	t.Parallel()
	b := setupBig(t, Config{})
	o := b.other(t, "-kids")
	n := b.server.Size(t, 5000, 1500) // more than the call's budget (the check below)
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

// A step's parent result is readable when the step runs, however long after its parent ended: a
// flow keeps its steps' outcomes until Keep after the flow ended (docs/flows.md, "Results"), not
// Keep after each step ended (a Delay, a slow sibling parent, a failed parent requeued days later).
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
// publisher that commits in between (slow, not dead) has its flow running: the undo, which asks
// the home first, leaves it alone, and the flow completes.
func TestFlowRecoverRacingCommitKeepsRunningFlow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	o := b.other(t, "-other")
	spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a"), o.step("c")}}
	p, err := planFlow(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.run(b.ctx, scriptFlowPub, "claim", "f", 60000, p.def, "n1", "a", "b", "c"); err != nil {
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
		commit, err = b.eng.run(ctx, scriptFlowPub, "commit", "f", "n1", p.bases[0], p.bases[1])
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

// A publish of a flow over several slots whose first call (the claim) lost its reply fails, and
// takes its claim back; the caller publishes again to find out, and "a duplicate means it does"
// exist (PublishFlow): a duplicate then names a flow that runs, never a claim no publisher will
// commit.
func TestFlowLostClaimReplyIsNoDuplicate(t *testing.T) {
	t.Parallel()
	srv, ctx, admin := blockableServer(t)
	opt := srv.Options()
	opt.ReadTimeout, opt.MaxRetries = 100*time.Millisecond, -1
	short := redis.NewClient(opt)
	t.Cleanup(func() { _ = short.Close() })
	probe := probeClient(t, srv)

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

// A relay writes the events of what it applies to a queue that keeps a stream, also when the
// queue's worker announced its stream after the relay's first delivery there.
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

// An ordered partition that holds on a dead letter: a worker leased a run of two at their last
// attempt and died. Recovery counts the attempt only of the first (the second never started), so
// only the first dies and holds the partition; requeued, it runs first, then the rest in order.
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
// id). The flow stays "publishing" until its commit, which then sets its state from its counts
// (failed, by the cancelled step); nothing of the claim is left behind.
func TestFlowCancelDuringPublishLeavesNoClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	o := b.other(t, "-other")
	spec := &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), o.step("b")}}
	p, err := planFlow(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.run(b.ctx, scriptFlowPub, "claim", "f", 60000, p.def, "n1", "a", "b"); err != nil {
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
	res, err := b.eng.run(b.ctx, scriptFlowPub, "commit", "f", "n1", p.bases[0], p.bases[1])
	if err != nil {
		t.Fatal(err)
	}
	_, cerr := p.result(res)
	aborted := errors.Is(cerr, ErrFlowAborted)
	if aborted {
		if _, err := p.abort(b.ctx, written, "n1"); err != nil { // the publisher's undo
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

// A flow's first steps are released when the flow is published: each writes a released event
// then, as a step whose parents were done does (lifecycle.md's event table).
func TestFirstStepsReleasedAtPublish(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Events: 1000})
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a")}}); err != nil {
		t.Fatal(err)
	}
	evs, err := b.eng.Events(b.ctx, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var released []string
	for _, ev := range evs {
		if ev.Kind == EventReleased {
			released = append(released, ev.ID)
		}
	}
	if !slices.Equal(released, []string{"f/a"}) {
		t.Fatalf("released events %v after the publish, want the first step's only: %+v", released, evs)
	}
}

// A flow step on hold behind a parent that is a dead letter (shown cancelled) still counts in
// Waiting, not Cancelled, until that letter is deleted: then it is cancelled for good.
func TestStepOnHoldCountsAsWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if _, err := PublishFlow(b.ctx, &FlowSpec{ID: "f", Steps: []FlowStep{b.step("a"), b.step("b", "a")}}); err != nil {
		t.Fatal(err)
	}
	b.runOnce("a")
	if st := b.stats(); st.Waiting != 1 || st.Cancelled != 0 || st.Dead != 1 {
		t.Fatalf("with a dead: waiting %d, cancelled %d, dead %d; want 1, 0, 1", st.Waiting, st.Cancelled, st.Dead)
	}
	if n, err := b.eng.Purge(b.ctx, []string{"f/a"}); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if st := b.stats(); st.Waiting != 0 || st.Cancelled != 1 {
		t.Fatalf("a purged: waiting %d, cancelled %d; want 0 and 1", st.Waiting, st.Cancelled)
	}
}
