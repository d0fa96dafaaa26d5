package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Concurrent Ack, Fetch, FetchNext, FetchWait and AckFetch calls of one Engine are merged: while
// one script call of the engine is in flight, the calls that arrive wait, and when it returns, the
// first of them sends all of them as one call (group commit). Redis runs scripts one at a time, so
// a call that waits here would have waited there; merged, the waiting calls share one round trip
// and one script's fixed cost (the script's setup, the clock, the partition indexes, the counters),
// which is most of what a fetch of a few tasks costs (docs/benchmarks.md, section 3.6).
//
// A merged call is the calls run one after the other in their order of arrival, all acks first:
// each caller gets the results its own call would have had at that point. A caller whose context
// ends while it waits leaves the queue and gets its context's error; once its call is sent, it
// waits for the result, as a call of its own would (fetch). A merged call that fails fails for
// every caller in it, with the error each own call would have had.

// mergeMaxTasks is the most tasks one merged call may carry, to fetch and to ack together; a single
// larger call is sent alone. A script holds Redis while it runs: 1,000 tasks take about 25 ms.
const mergeMaxTasks = 1000

// mergeInFlight is the most merged calls of one engine in flight at once. With one, Redis would
// sit idle while a call's reply travels back and the next call travels there; with two, one of
// them is usually running while the other travels. More make the calls smaller and, measured on
// 2 cores (docs/benchmarks.md, section 3.6), no faster.
const mergeInFlight = 2

// op is one caller's Ack, fetch or AckFetch, as a merged call carries it.
type op struct {
	ctx      context.Context
	acks     []Receipt
	consumer string // "" for an Ack
	n, run   int    // the most tasks to lease, and of one ordered partition in a row
	lease    time.Duration

	// turn receives one message: the batch this op is to send (it is the batch's first), or nil
	// when another caller sent it and its results are in.
	turn chan []*op

	errs    []error // one per ack
	ds      []Delivery
	nextDue time.Duration
	err     error
}

// merger queues the ops that arrive while a call is in flight.
type merger struct {
	mu      sync.Mutex
	busy    int   // calls in flight, or about to be sent by the caller they were handed to
	waiting []*op // in order of arrival
}

// do runs o, merged with the ops of other callers that wait at the same time, and leaves its
// results in o.
func (e *Engine) do(ctx context.Context, o *op) {
	o.ctx = ctx
	if e.cfg.MaxMerge == 1 {
		e.lead([]*op{o}, false)
		return
	}
	m := &e.merge
	m.mu.Lock()
	if m.busy < mergeInFlight {
		m.busy++
		m.mu.Unlock()
		e.lead([]*op{o}, true)
		return
	}
	o.turn = make(chan []*op, 1)
	m.waiting = append(m.waiting, o)
	m.mu.Unlock()

	var batch []*op
	select {
	case batch = <-o.turn:
	case <-ctx.Done():
		if m.withdraw(o) {
			o.err = ctx.Err()
			return
		}
		batch = <-o.turn // taken already: to send, or sent by another caller
	}
	if batch != nil {
		e.lead(batch, true)
	}
}

// withdraw takes o out of the queue and reports whether it was still there.
func (m *merger) withdraw(o *op) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.Index(m.waiting, o)
	if i < 0 {
		return false
	}
	m.waiting = slices.Delete(m.waiting, i, i+1)
	return true
}

// next takes the next batch off the queue: the longest run of waiting ops, in order, of at most
// max ops that carry at most mergeMaxTasks tasks together, to fetch and to ack (the first op
// always goes). With none waiting, it ends a call's slot and returns nil.
func (m *merger) next(max int) []*op {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.waiting) == 0 {
		m.busy--
		return nil
	}
	k, tasks := 0, 0
	for k < len(m.waiting) && k < max {
		o := m.waiting[k]
		if k > 0 && tasks+o.n+len(o.acks) > mergeMaxTasks {
			break
		}
		tasks += o.n + len(o.acks)
		k++
	}
	batch := m.waiting[:k:k]
	if k == len(m.waiting) {
		m.waiting = nil
	} else {
		// A copy, so the queue's array does not keep the ops of sent batches alive.
		m.waiting = slices.Clone(m.waiting[k:])
	}
	return batch
}

// lead sends batch, whose first op is the caller's own, as one call; the ops whose context ended
// before it went out are left out with their context's error. Then, when merged, it hands over
// (handOver). A panic in the call still hands over, with the panic as every op's error, so no
// caller waits for ever, and then goes on up the leader's stack.
func (e *Engine) lead(batch []*op, merged bool) {
	if merged {
		defer func() {
			if r := recover(); r != nil {
				for _, o := range batch {
					o.err = fmt.Errorf("srq: merged call: panic: %v", r)
				}
				e.handOver(batch)
				panic(r)
			}
		}()
	}
	live := make([]*op, 0, len(batch))
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = err
		} else {
			live = append(live, o)
		}
	}
	if len(live) > 0 {
		e.send(live)
	}
	if merged {
		e.handOver(batch)
	}
}

// handOver hands the next batch, if any is waiting, to its first op's caller to send, and tells
// the other callers in batch, the one just sent, that their results are in.
func (e *Engine) handOver(batch []*op) {
	if next := e.merge.next(e.cfg.MaxMerge); next != nil {
		next[0].turn <- next
	}
	for _, o := range batch[1:] {
		o.turn <- nil
	}
}

// send runs ops as one script call and leaves each op's results in it: ack.lua when none
// fetches, fetch.lua for a single fetch with nothing to ack, else ack_fetch.lua.
func (e *Engine) send(ops []*op) {
	// Once sent, the call is not cut off by a context (a client with ContextTimeoutEnabled would
	// stop reading at its deadline): the tasks it leased would be lost to their callers and stay
	// leased until their leases expire. The client's own timeouts still bound the call.
	ctx := context.WithoutCancel(ops[0].ctx)
	var fetches []*op
	acks := 0
	for _, o := range ops {
		if o.consumer != "" {
			fetches = append(fetches, o)
		}
		acks += len(o.acks)
	}
	receipts := func(args []any) []any {
		for _, o := range ops {
			args = appendReceipts(args, o.acks)
		}
		return args
	}
	window := e.cfg.DedupWindow.Milliseconds()
	sent := time.Now()
	var (
		codes   any   // ack codes, when the call acks
		replies []any // fetch replies, one per fetching op
		err     error
	)
	switch {
	case len(fetches) == 0:
		codes, err = e.run(ctx, scriptAck, receipts(append(make([]any, 0, 1+2*acks), window))...)
	case len(fetches) == 1 && acks == 0:
		o := fetches[0]
		var res any
		res, err = e.run(ctx, scriptFetch, o.consumer, o.n, o.lease.Milliseconds(), o.run)
		replies = []any{res}
	default:
		args := make([]any, 0, 2+4*len(fetches)+2*acks)
		args = append(args, window, len(fetches))
		for _, o := range fetches {
			args = append(args, o.consumer, o.n, o.lease.Milliseconds(), o.run)
		}
		var res any
		if res, err = e.run(ctx, scriptAckFetch, receipts(args)...); err == nil {
			parts, _ := replySlice(res)
			if len(parts) != 1+len(fetches) {
				err = fmt.Errorf("srq: ack and fetch: malformed reply %v", res)
			} else {
				codes, replies = parts[0], parts[1:]
			}
		}
	}
	if err == nil && codes != nil {
		err = spreadCodes(ops, codes, acks)
	}
	for i := 0; err == nil && i < len(replies); i++ {
		o := fetches[i]
		o.ds, o.nextDue, err = parseFetch(replies[i], sent, o.lease)
	}
	if err != nil {
		for _, o := range ops {
			o.errs, o.ds, o.nextDue, o.err = nil, nil, 0, err
		}
	}
}

// spreadCodes hands the ack codes of a call, want in all, to the ops whose acks they answer.
func spreadCodes(ops []*op, reply any, want int) error {
	codes, err := replyCodes(reply, want)
	if err != nil {
		return err
	}
	errs := codesToErrors(codes)
	for _, o := range ops {
		o.errs, errs = errs[:len(o.acks):len(o.acks)], errs[len(o.acks):]
	}
	return nil
}
