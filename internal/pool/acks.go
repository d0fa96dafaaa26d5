package pool

import (
	"context"
	"slices"
	"sync"

	"github.com/srqueue/srq/engine"
)

// ackQueue holds the jobs whose handlers succeeded until a call acks them. On a queue of one
// shard the fetchers take the queued acks along with their fetches (Engine.AckFetch: one round
// trip and one script for both), and the acker sends them only while no fetcher rides (fetches, or
// waits for a free slot to fetch with): so a busy worker makes one call where it would make two,
// and an idle one (its fetchers waiting in Redis for work) still acks at once.
//
// A fetcher that rides (ride(true)) promises to take the queue along with its next fetch. It keeps
// that promise because a job is queued before its slot is freed (runner.settle): a fetcher that grabs
// the slot takes the ack after it, and a slot not grabbed yet wakes a fetcher later.
type ackQueue struct {
	mu      sync.Mutex
	jobs    []*job
	riders  int           // fetchers riding: they take the acks, the acker leaves them
	retried bool          // acks of a failed call are queued again: the acker takes them, riders or not
	closed  bool          // no more jobs come: the acker takes everything
	signal  chan struct{} // capacity 1: the acker has acks to send, or the queue closed
}

func newAckQueue() *ackQueue { return &ackQueue{signal: make(chan struct{}, 1)} }

// put queues j's ack, waking the acker when no fetcher rides.
func (q *ackQueue) put(j *job) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	if q.riders == 0 {
		q.notify()
	}
	q.mu.Unlock()
}

// retry queues again the acks of js, whose call failed, for the acker to send: the acker, not a
// fetcher, since it pauses after failures, and a riding fetcher may wait long for a slot (these
// jobs gave theirs back already).
func (q *ackQueue) retry(js []*job) {
	q.mu.Lock()
	q.jobs = append(q.jobs, js...)
	q.retried = true
	q.notify()
	q.mu.Unlock()
}

// ride tells whether a fetcher takes acks along: on (true) from when it starts looking for work,
// off (false) when it stops fetching for a while (waiting in Redis, backing off, ending). Turning
// the last rider off hands the queued acks to the acker. A fetcher's on is paired with one off.
func (q *ackQueue) ride(on bool) {
	q.mu.Lock()
	if on {
		q.riders++
	} else {
		q.riders--
		if q.riders == 0 && len(q.jobs) > 0 {
			q.notify()
		}
	}
	q.mu.Unlock()
}

// take removes and returns every queued job, oldest first, for a fetch to carry. Every one: the
// fetch may have taken the slots of all of them (see ackQueue), so an ack left behind could wait
// for a slot that no running handler frees soon. They are few: the acks queued since the last fetch.
func (q *ackQueue) take() []*job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.takeLocked(len(q.jobs))
}

func (q *ackQueue) takeLocked(max int) []*job {
	n := min(len(q.jobs), max)
	if n == 0 {
		return nil
	}
	out := slices.Clone(q.jobs[:n])
	q.jobs = slices.Delete(q.jobs, 0, n) // zeroes the tail: handed-out jobs are not kept reachable
	return out
}

// next waits until the acker has acks to send and returns up to max of them. It returns nil, false
// once the queue is closed and empty.
func (q *ackQueue) next(max int) ([]*job, bool) {
	for range q.signal {
		q.mu.Lock()
		var batch []*job
		if q.riders == 0 || q.closed || q.retried {
			batch = q.takeLocked(max)
			q.retried = len(q.jobs) > 0 && q.retried
		}
		done := q.closed && len(q.jobs) == 0
		if (len(batch) > 0 && len(q.jobs) > 0) || q.closed {
			q.notify() // the acker's next call finds the rest, or that the queue is done
		}
		q.mu.Unlock()
		if len(batch) > 0 {
			return batch, true
		}
		if done {
			return nil, false
		}
	}
	return nil, false
}

// close says no more jobs come (every handler has ended); the acker sends what is queued and ends.
func (q *ackQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.notify()
	q.mu.Unlock()
}

// notify wakes the acker unless a wake-up is pending already. Called with mu held.
func (q *ackQueue) notify() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// maxAckBatch is the most acks sent in one call.
const maxAckBatch = 256

// closeAcks closes every shard's ack queue: every handler has ended, no more acks come.
func (p *runner) closeAcks() {
	for _, q := range p.acks {
		q.close()
	}
}

// ackLoop acks the jobs no fetch takes along, whatever is queued (up to maxAckBatch) in one call,
// with an acker for each shard: the shards live on different nodes of a cluster, and a node that
// does not answer, whose acks are sent again for up to a Lease, must not hold up the others' acks
// (nor so the ordered partitions those acks release). They end when their queues are closed and
// drained.
func (p *runner) ackLoop() error {
	return p.perShard(func(eng *engine.Engine) {
		for {
			batch, ok := p.acks[eng].next(maxAckBatch)
			if !ok {
				return
			}
			p.ack(eng, batch)
		}
	})
}

// ack acks jobs of one shard in one call, sent again while it fails in a way that may pass
// (settleCall: the tasks are still held and their leases extended, so an ack that lands later is
// as good), and releases them. An ack given up on means the task runs again after its lease
// expires, and with QueueConfig.CrashIsNotAttempt false that uses an attempt, dead-lettering a
// task on its last one though its handler succeeded. An ack that landed although its reply was
// lost is refused the second time, which is harmless.
func (p *runner) ack(eng *engine.Engine, js []*job) {
	var errs []error
	err := p.settleCall(p.base, func(ctx context.Context) (err error) {
		errs, err = eng.Ack(ctx, receipts(js))
		return err
	})
	p.acked(js, errs, err)
}

// receipts returns the receipts of js.
func receipts(js []*job) []engine.Receipt {
	rs := make([]engine.Receipt, len(js))
	for i, j := range js {
		rs[i] = j.ackReceipt()
	}
	return rs
}

// acked logs what an ack of js answered (errs, one per job, or err for the call) and releases them.
func (p *runner) acked(js []*job, errs []error, err error) {
	if err != nil {
		p.log(js[0].eng).Error("ack failed; the tasks return when their leases expire", "tasks", len(js), "err", err)
	}
	for i, j := range js {
		if err == nil && errs[i] != nil {
			j.src.log.Info("ack refused: the lease was lost", "task", j.d.ID, "err", errs[i])
		}
		p.release(j)
	}
}
