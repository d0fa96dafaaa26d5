package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/srqueue/srq/partition"
)

// Concurrent calls of one Engine are merged (group commit): Ack, Fetch, FetchNext, FetchWait's
// fetches and AckFetch on one merger, Publish on another. While two script calls of a merger are
// in flight, the calls that arrive wait, and when one returns, the first of them sends all of them
// as one call. Redis runs scripts one at a time, so a call that waits here would have waited
// there; merged, the waiting calls share one round trip and one script's fixed cost (the script's
// setup, the clock, the partition indexes, the counters), which is most of what a call of a few
// tasks costs (BenchmarkConsumeMerge, BenchmarkPublishMerge in bench/).
//
// A merged call is the calls run one after the other in their order of arrival, all acks first:
// each caller gets the results its own call would have had at that point. A caller whose context
// ends before its call is sent leaves with its context's error, and nothing of its call is sent.
// Once its call is sent, a caller waits for the result: the tasks a fetch leased would otherwise
// stay leased until their leases expire, and the call still reads the caller's receipts or
// messages while it is written. A merged call that fails fails for every caller in it. The call
// runs with the values (trace spans) of the context of the caller that sends it.

// mergeMaxTasks is the most tasks one merged call may carry, to fetch, to ack or to publish
// together, and mergeMaxBytes the most bytes of payloads and headers it may publish; a single
// larger call is sent alone. A script holds Redis while it runs (1,000 tasks take about 25 ms),
// and a command larger than the server's client-query-buffer-limit closes the connection.
const (
	mergeMaxTasks = 1000
	mergeMaxBytes = 8 << 20
)

// mergeInFlight is the most merged calls of one merger in flight at once. With one, Redis would
// sit idle while a call's reply travels back and the next call travels there; with two, one of
// them is usually running while the other travels. More make the calls smaller and, measured on
// 2 cores (BenchmarkConsumeMerge), no faster.
const mergeInFlight = 2

// pubsInFlight is mergeInFlight for publishes, whose single call is cheap enough that more of them
// in flight can beat merging them: on 2 cores, 8 producers of one task a call published about 1.15
// times as fast with 4 as with 2 on one machine, and 0.9 times on a slower one (BenchmarkPublishMerge;
// 64 producers about as fast with either); with 8, 64 producers lose a fifth.
const pubsInFlight = 4

// op is one caller's Ack, fetch, AckFetch or Publish, as a merged call carries it.
type op struct {
	ctx      context.Context
	acks     []Receipt
	consumer string // "" for an Ack
	n, run   int    // the most tasks to lease, and of one ordered partition in a row
	lease    time.Duration
	msgs     []any // a Publish's script arguments, publishArgs per message
	bytes    int   // of the payloads and headers in msgs
	newIDs   bool  // every id in msgs was made by Publish (NewID), so no task has it

	// state is queued until the caller that sends the op's batch marks it sent, or the op's own
	// caller marks it left, whichever comes first: a sent op's caller waits for the result, and a
	// left op is never read again, so the caller may reuse its receipts and messages at once.
	state atomic.Int32

	// turn receives one message: the batch this op is to send (it is the batch's first), or nil
	// when another caller sent it and its results are in.
	turn chan []*op

	errs    []error // one per ack
	ds      []Delivery
	nextDue time.Duration
	pubs    []publishReply // one per message published
	err     error
}

// The states of an op.
const (
	opQueued int32 = iota
	opSent
	opLeft
)

// published is the number of messages o publishes.
func (o *op) published() int { return len(o.msgs) / publishArgs }

// size is what o adds to a merged call, in tasks.
func (o *op) size() int { return o.n + len(o.acks) + o.published() }

// merger queues the ops that arrive while its calls are in flight, and sends them.
type merger struct {
	send     func([]*op) // runs one batch as one script call, leaving the results in its ops
	max      int         // the most ops in one batch; 1: every op alone
	inFlight int         // the most calls in flight before callers wait to be merged

	mu      sync.Mutex
	busy    int   // calls in flight, or about to be sent by the caller they were handed to
	waiting []*op // in order of arrival
}

// do runs o, merged with the ops of other callers that wait at the same time. It returns ctx's
// error when the caller left before its results came; otherwise the results are in o.
func (m *merger) do(ctx context.Context, o *op) error {
	o.ctx = ctx
	if m.max == 1 {
		m.lead([]*op{o}, false)
		return nil
	}
	m.mu.Lock()
	if m.busy < m.inFlight {
		m.busy++
		m.mu.Unlock()
		m.lead([]*op{o}, true)
		return nil
	}
	o.turn = make(chan []*op, 1)
	m.waiting = append(m.waiting, o)
	m.mu.Unlock()

	var batch []*op
	select {
	case batch = <-o.turn:
	case <-ctx.Done():
		if m.withdraw(o) {
			return ctx.Err()
		}
		if o.state.CompareAndSwap(opQueued, opLeft) {
			// Taken into a batch, not yet sent: the caller leaves, and the batch's sender skips o.
			// If the batch was handed to o to send, the turn is read in o's place.
			go m.leadLater(o)
			return ctx.Err()
		}
		batch = <-o.turn // sent by another caller (only a batch's own sender marks its first op): nil
	}
	if batch != nil {
		m.lead(batch, true)
	}
	return nil
}

// leadLater waits for the turn of o, whose caller left, and sends the batch if it is handed one.
// It ends with that message: every op in a batch gets exactly one. A panic in that call has no
// caller to reach and ends the process, as a panic on any goroutine of the library would.
func (m *merger) leadLater(o *op) {
	if batch := <-o.turn; batch != nil {
		m.lead(batch, true)
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
// max ops that carry at most mergeMaxTasks tasks and mergeMaxBytes bytes together (the first op
// always goes). With none waiting, it ends a call's slot and returns nil.
func (m *merger) next() []*op {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.waiting) == 0 {
		m.busy--
		return nil
	}
	k, tasks, bytes := 0, 0, 0
	for k < len(m.waiting) && k < m.max {
		o := m.waiting[k]
		if k > 0 && (tasks+o.size() > mergeMaxTasks || bytes+o.bytes > mergeMaxBytes) {
			break
		}
		tasks, bytes = tasks+o.size(), bytes+o.bytes
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

// lead sends batch, whose first op is the caller's own, as one call: the ops it marks sent. An op
// whose caller left is skipped; one whose context ended is marked sent with its context's error,
// not sent. Then, when merged, it hands over (handOver), on every way out: a panic in the call
// hands over with the panic as every op's error and goes on up the sender's stack, and a
// runtime.Goexit with an error saying so, so no caller waits for ever.
func (m *merger) lead(batch []*op, merged bool) {
	handed := !merged
	defer func() {
		if handed {
			return
		}
		r := recover()
		err := fmt.Errorf("srq: merged call: panic: %v", r)
		if r == nil {
			err = errors.New("srq: merged call: its goroutine exited")
		}
		for _, o := range batch {
			o.err = err
		}
		m.handOver(batch)
		if r != nil {
			panic(r)
		}
	}()
	live := make([]*op, 0, len(batch))
	for _, o := range batch {
		if !o.state.CompareAndSwap(opQueued, opSent) {
			continue // left
		}
		if err := o.ctx.Err(); err != nil {
			o.err = err
		} else {
			live = append(live, o)
		}
	}
	if len(live) > 0 {
		m.send(live)
	}
	if !handed {
		handed = true
		m.handOver(batch)
	}
}

// handOver hands the next batch, if any is waiting, to its first op's caller to send, and tells
// the other callers in batch, the one just sent, that their results are in.
func (m *merger) handOver(batch []*op) {
	if next := m.next(); next != nil {
		next[0].turn <- next
	}
	for _, o := range batch[1:] {
		o.turn <- nil
	}
}

// callContext returns the context of a call that carries ops. A call of one caller that does not
// fetch runs on its caller's context. A call that fetches is not cut off once sent (a client with
// ContextTimeoutEnabled would stop reading at a deadline): the tasks it leased would be lost to
// their callers and stay leased until their leases expire; the client's own timeouts still bound
// it. A merged call of acks or publishes has the latest deadline of its callers, when each has
// one, and no cancellation: its callers wait for it together.
func callContext(ops []*op, fetches bool) (context.Context, context.CancelFunc) {
	if len(ops) == 1 && !fetches {
		return ops[0].ctx, func() {}
	}
	ctx := context.WithoutCancel(ops[0].ctx)
	if fetches {
		return ctx, func() {}
	}
	var latest time.Time
	for _, o := range ops {
		d, ok := o.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}

// sendCalls runs ops, Acks, fetches and AckFetches, as one script call and leaves each op's
// results in it: ack.lua when none fetches, fetch.lua for a single fetch with nothing to ack,
// else ack_fetch.lua.
func (e *Engine) sendCalls(ops []*op) {
	var fetches []*op
	acks := 0
	for _, o := range ops {
		if o.consumer != "" {
			fetches = append(fetches, o)
		}
		acks += len(o.acks)
	}
	ctx, done := callContext(ops, len(fetches) > 0)
	defer done()
	receipts := func(args []any) []any {
		for _, o := range ops {
			args = appendAcks(args, o.acks)
		}
		return args
	}
	window, keep := e.cfg.DedupWindow.Milliseconds(), e.cfg.ResultRetention.Milliseconds()
	sent := time.Now()
	var (
		codes   any   // ack codes, when the call acks
		replies []any // fetch replies, one per fetching op
		err     error
	)
	switch {
	case len(fetches) == 0:
		codes, err = e.run(ctx, scriptAck, receipts(append(make([]any, 0, 2+3*acks), window, keep))...)
	case len(fetches) == 1 && acks == 0:
		o := fetches[0]
		var res any
		res, err = e.run(ctx, scriptFetch, o.consumer, o.n, o.lease.Milliseconds(), o.run)
		replies = []any{res}
	default:
		args := make([]any, 0, 3+4*len(fetches)+3*acks)
		args = append(args, window, keep, len(fetches))
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
		err = spreadCodes(ops, e.relayMarked(codes, acks), acks)
	}
	var unreadable []Failure
	for i := 0; err == nil && i < len(replies); i++ {
		o := fetches[i]
		var bad []Failure
		o.ds, bad, o.nextDue, err = parseFetch(replies[i], sent, o.lease)
		unreadable = append(unreadable, bad...)
	}
	if err != nil {
		for _, o := range ops {
			o.errs, o.ds, o.nextDue, o.err = nil, nil, 0, err
		}
		return
	}
	e.killUnreadable(ctx, unreadable)
}

// killUnreadable dead-letters the fetched tasks whose records could not be read, with the reason
// as their last error: no consumer can run them, as none can run a payload its codec cannot
// decode. When the call fails they stay leased, return when their leases expire, and are
// dead-lettered by the fetch that takes them next.
func (e *Engine) killUnreadable(ctx context.Context, fs []Failure) {
	if len(fs) > 0 {
		_, _ = e.Kill(ctx, fs)
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

// usualCall says whether every message of ops is a usual one, which publish_usual.lua adds: no
// headers, and every option at its zero value but max attempts, the same for all (a Queue gives
// every message its default). It returns that max attempts as messageOpts wrote it ("0": none).
func usualCall(ops []*op) (maxAttempts string, ok bool) {
	opts, _ := ops[0].msgs[4].(string)
	for _, o := range ops {
		for i := 0; i < len(o.msgs); i += publishArgs {
			if h, _ := o.msgs[i+3].([]byte); len(h) > 0 || o.msgs[i+4] != opts {
				return "", false
			}
		}
	}
	if opts == "" {
		return "0", true
	}
	return usualMaxAttempts(opts)
}

// newIDs says whether every id ops publish was made for them by Publish. A made id (NewID) belongs
// to no task, and a call that may have run is never sent again (sendOnce), so publish_usual.lua
// need not look for its task.
func newIDs(ops []*op) bool {
	for _, o := range ops {
		if !o.newIDs {
			return false
		}
	}
	return true
}

// usualMaxAttempts returns the max attempts of opts, messageOpts's options of a message, when that
// is the message's only option not at its zero value ("0,0,0,<max>,,,,").
func usualMaxAttempts(opts string) (string, bool) {
	rest, ok := strings.CutPrefix(opts, "0,0,0,")
	if !ok {
		return "", false
	}
	n, ok := strings.CutSuffix(rest, ",,,,")
	if !ok || n == "" || strings.Trim(n, "0123456789") != "" {
		return "", false
	}
	return n, true
}

// sendPublishes runs the Publish ops as one publish.lua call, their messages in order, and leaves
// each op's results in it.
func (e *Engine) sendPublishes(ops []*op) {
	ctx, done := callContext(ops, false)
	defer done()
	total := 0
	for _, o := range ops {
		total += o.published()
	}
	s, args := scriptPublish, []any(nil)
	if maxAttempts, ok := usualCall(ops); ok {
		// publish_usual.lua: 3 arguments a message, and no batches (it refuses none).
		s, args = scriptPubUsual, make([]any, 0, 2+3*total)
		window := e.cfg.DedupWindow.Milliseconds()
		if newIDs(ops) {
			window = -1 - window // no id to check
		}
		args = append(args, window, maxAttempts)
		for _, o := range ops {
			for i := 0; i < len(o.msgs); i += publishArgs {
				args = append(args, o.msgs[i:i+3]...) // id, partition, payload
			}
		}
	} else {
		args = make([]any, 0, 2+len(ops)+publishArgs*total)
		args = append(args, e.cfg.DedupWindow.Milliseconds(), len(ops))
		for _, o := range ops {
			args = append(args, o.published()) // each op's messages are a batch, added whole or not at all
		}
		for _, o := range ops {
			args = append(args, o.msgs...)
		}
	}
	res, err := e.run(ctx, s, args...)
	var replies []publishReply
	if err == nil {
		replies, err = publishReplies(e.relayMarked(res, total), total)
	}
	for _, o := range ops {
		if err != nil {
			o.pubs, o.err = nil, err
			continue
		}
		o.pubs = replies[:o.published():o.published()]
		for i, r := range o.pubs {
			switch r.code {
			case codeLevels: // the message that would pass the cap: the batch was refused
				p, _ := o.msgs[i*publishArgs+1].(string)
				opts, _ := o.msgs[i*publishArgs+4].(string)
				o.err = priorityError(i, partition.Key(p), optsPriority(opts))
			case codeRefused:
				o.err = cmp.Or(o.err, error(ErrTooManyPriorities))
			case codeNotFound: // a spawned child whose parent, in this slot, is gone
				id, _ := o.msgs[i*publishArgs].(string)
				o.err = cmp.Or(o.err, fmt.Errorf("%w: the parent of task %s (it ended); the task was not published", ErrNotFound, id))
			}
		}
		if o.err != nil {
			o.pubs = nil
		}
		replies = replies[o.published():]
	}
}
