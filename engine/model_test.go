package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/srqueue/srq/internal/redistest"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// TestModel is a model-based test: it runs thousands of random operations against the engine and
// against a plain in-memory model of the contract (DESIGN.md §2, docs/guarantees.md), and checks
// after every step that the two agree. The seed is logged; SRQ_MODEL_SEED=<seed> replays a run
// exactly, and SRQ_MODEL_STEPS=<n> sets its length (default 3000 steps for each of four
// configurations, 300 under -short). A failure prints the last operations of the run.
//
// Time stands still for this test: delays are 0 or an hour, leases an hour, so nothing becomes due
// and no lease expires while it runs, and it never sleeps. It checks, numbered as in its messages:
//
//  1. every fetched task was pending and available in the model;
//  2. an ordered partition hands out exactly its next task (priority desc, then publish or requeue
//     order; a rejected task and the later tasks taken back with it keep their places), and a
//     fetch lengthens the runs of the ordered partitions it took, in order and as far as the fetch
//     size and MaxOrderedRun allow, only once nothing else is ready; an unordered partition hands
//     out a task of its highest available priority;
//  3. an ordered partition is never leased to two fetches at once;
//  4. a partition with a concurrency limit is handed no task while limit tasks leased under a
//     limit are out;
//  5. paused partitions, and ordered ones blocked by a reject with a delay, hand out nothing;
//  6. a fetch returns fewer than n tasks only when no partition can hand out more, and partitions
//     are served round-robin: one that has been ready since before another's last turn gets a
//     turn before that other's next one;
//  7. Stats (pending, in flight, dead, ready and scheduled partitions, every counter) equal the
//     model's after every step;
//  8. every per-item result of Publish (duplicates), Ack, Reject (dead-lettered or not), Extend,
//     Kill, Requeue and Purge is the model's, stale and made-up tokens included;
//  9. every 100 steps and at the end, each task's record, the dead-letter list (newest first, trimmed
//     oldest first to the cap), the ready and scheduled indexes, and the exact set of the queue's
//     keys match the model; after a final drain (resume all, lift limits, ack everything) only the
//     fixed keys, the dead letters and the tasks delayed or blocked for the hour remain.
//
// Every delivery is also checked for a growing fencing token and for the attempt, priority, payload,
// headers and last error the model expects.
func TestModel(t *testing.T) {
	t.Parallel()
	seed := modelSeed(t)
	steps := modelSteps(t)
	t.Logf("seed %d, %d steps a variant; replay with SRQ_MODEL_SEED=%d", seed, steps, seed)
	variants := []struct {
		name string
		cfg  Config
	}{
		{"plain", Config{}},
		{"dedup-run2", Config{DedupWindow: time.Hour, MaxOrderedRun: 2}},
		{"run1", Config{MaxOrderedRun: 1}},
		{"deadcap3", Config{DeadLetterMaxCount: 3, MaxOrderedRun: 3}},
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			r := newModelRun(t, v.cfg, seed, uint64(i))
			r.run(steps)
		})
	}
}

// modelSeed returns SRQ_MODEL_SEED when set, else a random seed.
func modelSeed(t *testing.T) uint64 {
	if s := os.Getenv("SRQ_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SRQ_MODEL_SEED=%q: %v", s, err)
		}
		return seed
	}
	return rand.Uint64()
}

// modelSteps returns SRQ_MODEL_STEPS when set, else 3000, or 300 under -short or on the embedded
// Redis (where a variant of 3000 steps takes minutes under -race).
func modelSteps(t *testing.T) int {
	if s := os.Getenv("SRQ_MODEL_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SRQ_MODEL_STEPS=%q: want a positive integer", s)
		}
		return n
	}
	if testing.Short() {
		return 300
	}
	return redistest.Size(t, 3000, 300)
}

// The partitions the random operations use.
var (
	modelOrdered   = []partition.Key{"!a", "!b", "!c", "!d"}
	modelUnordered = []partition.Key{"x", "y", "z:1", partition.Base}
	modelPrios     = []int{0, 0, 1, 5, -2}
	modelConsumers = []string{"c1", "c2", "c3"}
)

// modelDelay is the only non-zero delay used: long enough that nothing delayed becomes due while
// the test runs. Leases are as long, so none expires.
const modelDelay = time.Hour

// ---------------------------------------------------------------------------------------------
// The model: a plain description of the contract, with no Redis in it.

type mState int

const (
	mPending mState = iota + 1
	mLeased
	mDead
)

func (s mState) String() string {
	switch s {
	case mPending:
		return "pending"
	case mLeased:
		return "leased"
	case mDead:
		return "dead"
	}
	return "?"
}

type mTask struct {
	id       string
	born     int64 // creation order, for deterministic iteration
	part     partition.Key
	prio     int
	seq      int64 // order among equal priorities: the publish or requeue order
	delayed  bool  // available an hour from now: invisible for the rest of the test
	state    mState
	attempts int
	max      int
	lastErr  string
	payload  string
	headers  map[string]string
	// While leased:
	token    Token
	consumer string
	tracked  bool  // the lease holds the partition: ordered, or leased under a concurrency limit
	leased   int64 // lease order
	// While dead:
	died int64 // death order
}

type mPart struct {
	paused  bool
	limit   int
	blocked bool // ordered: a reject with a delay blocked it for the hour
	// For the round-robin check, in model clock ticks:
	readySince int64 // when it last became able to hand out work; -1 while it cannot
	lastTurn   int64 // its last turn in a fetch; -1 before the first
}

type contractModel struct {
	dedup    bool // acked ids stay duplicates (a dedup window longer than the test)
	tasks    map[string]*mTask
	parts    map[partition.Key]*mPart
	ackedIDs map[string]bool
	born     int64
	seq      int64
	leaseSeq int64
	clock    int64
	deaths   int64
	lastTok  Token
	c        struct{ published, duplicates, acked, rejected, takenBack, handedBack, deadLettered, requeued, purged, trimmed int64 }
}

func newModel(dedup bool) *contractModel {
	return &contractModel{dedup: dedup, tasks: map[string]*mTask{}, parts: map[partition.Key]*mPart{},
		ackedIDs: map[string]bool{}}
}

func (m *contractModel) part(p partition.Key) *mPart {
	ps := m.parts[p]
	if ps == nil {
		ps = &mPart{readySince: -1, lastTurn: -1}
		m.parts[p] = ps
	}
	return ps
}

func (m *contractModel) partKeys() []partition.Key {
	ks := make([]partition.Key, 0, len(m.parts))
	for p := range m.parts {
		ks = append(ks, p)
	}
	slices.Sort(ks)
	return ks
}

// list returns the tasks keep accepts, in creation order.
func (m *contractModel) list(keep func(*mTask) bool) []*mTask {
	var out []*mTask
	for _, t := range m.tasks {
		if keep(t) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *mTask) int { return int(a.born - b.born) })
	return out
}

func mIn(s mState) func(*mTask) bool { return func(t *mTask) bool { return t.state == s } }

// duplicate says whether publishing id now is a no-op.
func (m *contractModel) duplicate(id string) bool {
	return m.tasks[id] != nil || m.dedup && m.ackedIDs[id]
}

// modelRunsBefore is the contract's order inside a partition among available tasks: priority desc,
// then available-at asc, then publish sequence asc. With delays of 0 or an hour, the available
// tasks' available-at follows their sequence, so priority then sequence decides.
func modelRunsBefore(a, b *mTask) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return a.seq < b.seq
}

type mSum struct {
	pending, avail, leased, tracked int
	next                            *mTask      // the available task that runs first
	prios                           map[int]int // pending tasks by priority
}

func (m *contractModel) sums() map[partition.Key]*mSum {
	out := make(map[partition.Key]*mSum, len(m.parts))
	for p := range m.parts {
		out[p] = &mSum{prios: map[int]int{}}
	}
	for _, t := range m.tasks {
		s := out[t.part]
		switch t.state {
		case mPending:
			s.pending++
			s.prios[t.prio]++
			if !t.delayed {
				s.avail++
				if s.next == nil || modelRunsBefore(t, s.next) {
					s.next = t
				}
			}
		case mLeased:
			s.leased++
			if t.tracked {
				s.tracked++
			}
		}
	}
	return out
}

// held says whether p may hand out no more work because of its leases.
func (m *contractModel) held(p partition.Key, s *mSum) bool {
	if p.IsOrdered() {
		return s.leased > 0
	}
	l := m.parts[p].limit
	return l > 0 && s.tracked >= l
}

// canServe says whether p can hand out a task now.
func (m *contractModel) canServe(p partition.Key, s *mSum) bool {
	ps := m.parts[p]
	return !ps.paused && !ps.blocked && !m.held(p, s) && s.avail > 0
}

// scheduled says whether p has pending work it will hand out later by itself (delayed or
// blocked), as opposed to ready now, paused or held.
func (m *contractModel) scheduled(p partition.Key, s *mSum) bool {
	ps := m.parts[p]
	return !ps.paused && !m.held(p, s) && s.pending > 0 && !m.canServe(p, s)
}

// refresh updates when each partition became ready, after any change.
func (m *contractModel) refresh() {
	sums := m.sums()
	for p, ps := range m.parts {
		switch {
		case !m.canServe(p, sums[p]):
			ps.readySince = -1
		case ps.readySince < 0:
			ps.readySince = m.clock
		}
	}
}

// settleErr is what Ack, Extend, Reject and Kill answer for receipt rc.
func (m *contractModel) settleErr(rc Receipt) error {
	t := m.tasks[rc.ID]
	switch {
	case t == nil:
		return ErrNotFound
	case t.state != mLeased || t.token != rc.Token:
		return ErrStaleToken
	}
	return nil
}

func (t *mTask) unlease(s mState) {
	t.state, t.token, t.consumer, t.tracked, t.leased = s, 0, "", false, 0
}

// ---------------------------------------------------------------------------------------------
// The run: random operations on both sides.

type modelRun struct {
	t       *testing.T
	b       *bundle
	ctx     context.Context
	rng     *rand.Rand
	cfg     Config
	seed    uint64
	m       *contractModel
	step    int
	trace   []string
	history []Receipt // receipts of past deliveries, for stale settles
	fresh   int       // counter behind fresh ids and payloads
	seen    map[string]int
}

func newModelRun(t *testing.T, cfg Config, seed, stream uint64) *modelRun {
	b := setup(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return &modelRun{t: t, b: b, ctx: ctx, rng: rand.New(rand.NewPCG(seed, stream)), cfg: b.eng.Config(),
		seed: seed, m: newModel(cfg.DedupWindow > 0), seen: map[string]int{}}
}

func (r *modelRun) logf(format string, args ...any) {
	r.trace = append(r.trace, fmt.Sprintf("%4d ", r.step)+fmt.Sprintf(format, args...))
	if len(r.trace) > 400 {
		r.trace = slices.Clone(r.trace[200:])
	}
}

func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	tail := r.trace[max(0, len(r.trace)-40):]
	r.t.Fatalf("%s: step %d: %s\nreplay: SRQ_MODEL_SEED=%d go test ./engine -run '^TestModel$/^%s$'\nlast operations:\n  %s",
		r.t.Name(), r.step, fmt.Sprintf(format, args...), r.seed, modelLastName(r.t.Name()), strings.Join(tail, "\n  "))
}

func modelLastName(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

func (r *modelRun) must(err error, what string) {
	r.t.Helper()
	if err != nil {
		r.fatalf("%s: %v", what, err)
	}
}

func (r *modelRun) run(steps int) {
	type op struct {
		weight int
		name   string
		f      func()
	}
	ops := []op{
		{22, "publish", r.opPublish},
		{26, "fetch", func() { r.opFetch(modelPick(r.rng, modelConsumers), 1+r.rng.IntN(5)) }},
		{16, "ack", r.opAck},
		{8, "ackfetch", r.opAckFetch},
		{10, "reject", r.opReject},
		{3, "kill", r.opKill},
		{3, "extend", r.opExtend},
		{4, "pause", r.opPause},
		{3, "limit", r.opLimit},
		{4, "requeue", r.opRequeue},
		{1, "purge", r.opPurge},
		{1, "recover", r.opRecover},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for r.step = 1; r.step <= steps; r.step++ {
		x := r.rng.IntN(total)
		for _, o := range ops {
			if x -= o.weight; x < 0 {
				r.seen["op:"+o.name]++
				o.f()
				break
			}
		}
		r.checkStats()
		if r.step%100 == 0 {
			r.checkFull()
		}
	}
	r.drain()
	r.checkStats()
	r.checkFull()
	left := r.m.list(mIn(mPending))
	for _, tk := range left {
		if !tk.delayed && !r.m.parts[tk.part].blocked {
			r.fatalf("after the drain task %s of %q is still pending and available", tk.id, tk.part)
		}
	}
	r.t.Logf("seed %d: after %d steps and the drain: %d tasks delayed or blocked for the hour, %d dead; coverage %v",
		r.seed, steps, len(left), len(r.m.list(mIn(mDead))), r.seen)
}

func modelPick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// ---------------------------------------------------------------------------------------------
// Operations.

func (r *modelRun) randPart() partition.Key {
	if r.rng.IntN(2) == 0 {
		return modelPick(r.rng, modelOrdered)
	}
	return modelPick(r.rng, modelUnordered)
}

// publishPart picks a partition to publish to, mostly not one blocked for the rest of the test.
func (r *modelRun) publishPart() partition.Key {
	p := r.randPart()
	if ps := r.m.parts[p]; ps != nil && ps.blocked && r.rng.IntN(5) != 0 {
		p = r.randPart()
	}
	return p
}

// randID returns a pooled id (often reused, so duplicates happen), a fresh one, or "" (the engine
// generates one).
func (r *modelRun) randID() string {
	switch x := r.rng.IntN(10); {
	case x == 0:
		return ""
	case x < 6:
		return fmt.Sprintf("k%02d", r.rng.IntN(40))
	default:
		r.fresh++
		return fmt.Sprintf("f%d", r.fresh)
	}
}

func (r *modelRun) opPublish() {
	m := r.m
	waiting := m.list(func(t *mTask) bool { return t.state == mPending && !t.delayed && !m.parts[t.part].blocked })
	if len(waiting) > 60 || len(m.tasks) > 400 {
		r.seen["publish-skipped"]++
		r.opFetch(modelPick(r.rng, modelConsumers), 5)
		return
	}
	n := 1 + r.rng.IntN(5)
	msgs := make([]Message, 0, n)
	for range n {
		r.fresh++
		msg := Message{ID: r.randID(), Partition: r.publishPart(), Priority: modelPick(r.rng, modelPrios),
			MaxAttempts: modelPick(r.rng, []int{0, 0, 1, 2, 3}), Payload: []byte(fmt.Sprintf("payload-%d", r.fresh))}
		if len(msgs) > 0 && r.rng.IntN(10) == 0 && msgs[0].ID != "" {
			msg.ID = msgs[0].ID // the same id twice in one batch
		}
		if r.rng.IntN(20) == 0 {
			msg.Delay = modelDelay
		}
		if r.rng.IntN(5) == 0 {
			msg.Headers = map[string]string{"traceparent": fmt.Sprintf("00-%032x-%016x-01", r.fresh, r.fresh)}
		}
		msgs = append(msgs, msg)
	}
	m.clock++
	res, err := r.b.eng.Publish(r.ctx, msgs)
	r.must(err, "publish")
	if len(res) != len(msgs) {
		r.fatalf("publish of %d messages returned %d results", len(msgs), len(res))
	}
	var desc []string
	for i, msg := range msgs {
		id := msg.ID
		if id == "" {
			id = res[i].ID
			if id == "" || m.duplicate(id) {
				r.fatalf("publish: generated id %q is empty or taken", id)
			}
		} else if res[i].ID != id {
			r.fatalf("publish: result %d has id %q, want %q", i, res[i].ID, id)
		}
		dup := m.duplicate(id)
		desc = append(desc, fmt.Sprintf("%s@%q/p%d/m%d%s%s", id, msg.Partition, msg.Priority, msg.MaxAttempts,
			map[bool]string{true: "/1h"}[msg.Delay > 0], map[bool]string{true: "=dup"}[dup]))
		if res[i].Duplicate != dup {
			r.fatalf("(8) publish %s to %q: duplicate=%v, the model says %v (model: %v)", id, msg.Partition,
				res[i].Duplicate, dup, r.describe(id))
		}
		if dup {
			m.c.duplicates++
			r.seen["duplicate"]++
			continue
		}
		m.born++
		m.seq++
		m.part(msg.Partition)
		m.tasks[id] = &mTask{id: id, born: m.born, part: msg.Partition, prio: msg.Priority, seq: m.seq,
			delayed: msg.Delay > 0, state: mPending, max: msg.MaxAttempts, payload: string(msg.Payload),
			headers: msg.Headers}
		m.c.published++
	}
	r.logf("publish %s", strings.Join(desc, " "))
	m.refresh()
}

// maxRun is the longest run of one ordered partition a fetch of n may lease.
func (r *modelRun) maxRun(n int) int {
	if r.cfg.MaxOrderedRun > 0 {
		return min(n, r.cfg.MaxOrderedRun)
	}
	return n
}

// opFetch fetches up to n tasks and checks them against the model; it returns how many it got.
//
// A fetch first serves ready partitions round-robin, one task a turn; an ordered partition served
// is held by this fetch and leaves the round-robin. Only when no partition can hand out more does
// it lengthen the runs of the ordered partitions it holds, in the order it took them, each up to
// maxRun tasks in all. The model predicts the second phase exactly, and checks every turn of the
// first against the contract.
func (r *modelRun) opFetch(consumer string, n int) int {
	r.m.clock++
	ds, err := r.b.eng.Fetch(r.ctx, consumer, n, modelDelay)
	r.must(err, "fetch")
	return r.checkFetch(consumer, n, ds)
}

// opAckFetch acks some receipts and fetches in one AckFetch call, and checks both parts against
// the model as an ack followed by a fetch.
func (r *modelRun) opAckFetch() {
	rs := r.receipts(1 + r.rng.IntN(4))
	consumer, n := modelPick(r.rng, modelConsumers), 1+r.rng.IntN(5)
	errs, ds, _, err := r.b.eng.AckFetch(r.ctx, rs, consumer, n, modelDelay)
	r.must(err, "ack and fetch")
	r.logf("ack and fetch:")
	r.m.clock++
	r.checkAck(rs, errs)
	r.m.clock++
	r.checkFetch(consumer, n, ds)
}

// checkFetch checks ds, what a fetch of n for consumer returned, against the model and applies
// it; it returns how many tasks there were.
func (r *modelRun) checkFetch(consumer string, n int, ds []Delivery) int {
	m := r.m
	var desc []string
	for _, d := range ds {
		desc = append(desc, fmt.Sprintf("%s@%q", d.ID, d.Partition))
	}
	r.logf("fetch %s n=%d -> [%s]", consumer, n, strings.Join(desc, " "))
	if len(ds) > n {
		r.fatalf("fetch of %d returned %d tasks", n, len(ds))
	}
	taken, i := 0, 0
	var held []partition.Key // ordered partitions this fetch took, in turn order
	// Round-robin turns while any partition can hand out work.
	for ; taken < n; taken, i = taken+1, i+1 {
		sums := m.sums()
		ready := m.readyParts(sums)
		if len(ready) == 0 {
			break
		}
		if i >= len(ds) {
			r.fatalf("(6) fetch of %d returned %d tasks, but %q can still hand out work (next %s)", n, len(ds),
				ready[0], sums[ready[0]].next.id)
		}
		d := ds[i]
		t := r.checkHandOut(d, sums)
		p := t.part
		if p.IsOrdered() && slices.Contains(held, p) {
			r.fatalf("(6) fetch lengthened the run of %q with %s while %q can still hand out work", p, d.ID, ready[0])
		}
		s := sums[p]
		if p.IsOrdered() {
			if d.ID != s.next.id {
				r.fatalf("(2) ordered partition %q handed out %s, want %s, the next in order; pending in order: %v",
					p, d.ID, s.next.id, r.order(p))
			}
			held = append(held, p)
		} else if t.prio != s.next.prio {
			r.fatalf("(2) unordered partition %q handed out %s of priority %d while %s of priority %d is available",
				p, t.id, t.prio, s.next.id, s.next.prio)
		}
		m.clock++
		r.checkTurn(p)
		m.parts[p].lastTurn = m.clock
		r.lease(t, d, consumer)
		m.clock++
		m.refresh()
	}
	// Nothing else can hand out work: the held ordered partitions' runs grow, in order.
	for _, p := range held {
		run := 1
		for ; taken < n && run < r.maxRun(n); run, taken, i = run+1, taken+1, i+1 {
			next := m.sums()[p].next
			if next == nil {
				break
			}
			if i >= len(ds) || ds[i].ID != next.id {
				got := "nothing more"
				if i < len(ds) {
					got = ds[i].ID + fmt.Sprintf("@%q", ds[i].Partition)
				}
				r.fatalf("(2) the run of ordered partition %q should go on with %s (task %d of the run), got %s; pending in order: %v",
					p, next.id, run+1, got, r.order(p))
			}
			r.lease(next, ds[i], consumer)
		}
		r.seen[fmt.Sprintf("ordered-run-%d", run)]++
	}
	if i < len(ds) {
		// Every task the model allows has been matched: say why this one is not allowed.
		r.checkHandOut(ds[i], m.sums())
		r.fatalf("fetch returned %s beyond the %d tasks the model allows", ds[i].ID, i)
	}
	m.refresh()
	if taken == 0 {
		r.seen["fetch-empty"]++
	}
	return taken
}

// readyParts lists the partitions that can hand out a task now.
func (m *contractModel) readyParts(sums map[partition.Key]*mSum) []partition.Key {
	var out []partition.Key
	for _, p := range m.partKeys() {
		if m.canServe(p, sums[p]) {
			out = append(out, p)
		}
	}
	return out
}

// checkHandOut checks that the model allows delivery d to be handed out in a turn now and returns
// its task.
func (r *modelRun) checkHandOut(d Delivery, sums map[partition.Key]*mSum) *mTask {
	m := r.m
	t := m.tasks[d.ID]
	if t == nil || t.state != mPending {
		r.fatalf("(1) fetched %s, which the model has as %s", d.ID, r.describe(d.ID))
	}
	p := t.part
	s, ps := sums[p], m.parts[p]
	switch {
	case d.Partition != p:
		r.fatalf("fetched %s with partition %q, published to %q", d.ID, d.Partition, p)
	case t.delayed:
		r.fatalf("(1) fetched %s of %q, which is delayed for the hour", d.ID, p)
	case ps.paused:
		r.fatalf("(5) paused partition %q handed out %s", p, d.ID)
	case ps.blocked:
		r.fatalf("(5) partition %q, blocked for the hour by a reject with delay, handed out %s", p, d.ID)
	case p.IsOrdered() && s.leased > 0:
		r.fatalf("(3) ordered partition %q handed out %s while %d of its tasks are leased: %v", p, d.ID,
			s.leased, r.leasesOf(p))
	case !p.IsOrdered() && ps.limit > 0 && s.tracked >= ps.limit:
		r.fatalf("(4) partition %q with concurrency limit %d handed out %s while %d tasks leased under the limit are out",
			p, ps.limit, d.ID, s.tracked)
	}
	return t
}

// checkTurn checks round-robin fairness when p gets a turn: a partition that has been ready since
// before p's previous turn must have had a turn since.
func (r *modelRun) checkTurn(p partition.Key) {
	m := r.m
	last := m.parts[p].lastTurn
	for _, q := range m.partKeys() {
		qs := m.parts[q]
		if q != p && qs.readySince >= 0 && qs.readySince < last && qs.lastTurn < last {
			r.fatalf("(6) round robin: %q got a turn again, but %q has been ready since before %q's previous turn and got none since",
				p, q, p)
		}
	}
}

// lease records delivery d of pending task t and checks what the delivery says about the task.
func (r *modelRun) lease(t *mTask, d Delivery, consumer string) {
	m := r.m
	if d.Token <= m.lastTok {
		r.fatalf("fencing token %d of %s does not grow: the last one handed out was %d", d.Token, d.ID, m.lastTok)
	}
	m.lastTok = d.Token
	t.attempts++
	switch {
	case d.ID != t.id:
		r.fatalf("delivery %s leased as %s", d.ID, t.id)
	case d.Attempt != t.attempts || d.MaxAttempts != t.max:
		r.fatalf("delivery of %s: attempt %d of %d, the model says %d of %d", d.ID, d.Attempt, d.MaxAttempts, t.attempts, t.max)
	case d.Priority != t.prio || string(d.Payload) != t.payload || !maps.Equal(d.Headers, t.headers):
		r.fatalf("delivery of %s: priority %d payload %q headers %v, published %d %q %v", d.ID, d.Priority, d.Payload,
			d.Headers, t.prio, t.payload, t.headers)
	case d.LastError != t.lastErr || d.Crashes != 0:
		r.fatalf("delivery of %s: last error %q crashes %d, the model says %q and 0", d.ID, d.LastError, d.Crashes, t.lastErr)
	}
	m.leaseSeq++
	t.state, t.token, t.consumer, t.leased = mLeased, d.Token, consumer, m.leaseSeq
	t.tracked = t.part.IsOrdered() || m.parts[t.part].limit > 0
	r.history = append(r.history, d.Receipt())
	if len(r.history) > 300 {
		r.history = slices.Clone(r.history[100:])
	}
}

// receipts picks k receipts: mostly current leases, sometimes old deliveries (most of them stale)
// or made-up tokens, and now and then one twice.
func (r *modelRun) receipts(k int) []Receipt {
	leases := r.m.list(mIn(mLeased))
	var out []Receipt
	for range k {
		switch x := r.rng.IntN(100); {
		case len(out) > 0 && x < 4:
			out = append(out, out[r.rng.IntN(len(out))])
		case len(leases) > 0 && x < 85:
			t := modelPick(r.rng, leases)
			out = append(out, Receipt{ID: t.id, Token: t.token})
		case len(r.history) > 0 && x < 95:
			out = append(out, modelPick(r.rng, r.history))
		default:
			out = append(out, Receipt{ID: fmt.Sprintf("k%02d", r.rng.IntN(40)), Token: Token(r.rng.Uint64N(1 << 20))})
		}
	}
	return out
}

func (r *modelRun) opAck() { r.ack(r.receipts(1 + r.rng.IntN(4))) }

func (r *modelRun) ack(rs []Receipt) {
	r.m.clock++
	errs, err := r.b.eng.Ack(r.ctx, rs)
	r.must(err, "ack")
	r.checkAck(rs, errs)
}

// checkAck checks errs, what an ack of rs returned, against the model and applies it.
func (r *modelRun) checkAck(rs []Receipt, errs []error) {
	m := r.m
	r.logf("ack %s -> %v", modelReceiptList(rs), errs)
	if len(errs) != len(rs) {
		r.fatalf("ack of %d returned %d results", len(rs), len(errs))
	}
	for i, rc := range rs {
		want := m.settleErr(rc)
		if !modelSameErr(errs[i], want) {
			r.fatalf("(8) ack %s token %d: %v, the model says %v (model: %s)", rc.ID, rc.Token, errs[i], want, r.describe(rc.ID))
		}
		r.count("ack", want)
		if want == nil {
			delete(m.tasks, rc.ID)
			if m.dedup {
				m.ackedIDs[rc.ID] = true
			}
			m.c.acked++
		}
	}
	m.refresh()
}

func (r *modelRun) opReject() {
	m := r.m
	var rjs []Rejection
	for _, rc := range r.receipts(1 + r.rng.IntN(3)) {
		rjs = append(rjs, r.rejection(rc))
		// Now and then the batch also names a later leased task of the same ordered partition,
		// before or after this one.
		t := m.tasks[rc.ID]
		if t == nil || !t.part.IsOrdered() || m.settleErr(rc) != nil || r.rng.IntN(3) != 0 {
			continue
		}
		if later := m.laterLeases(t); len(later) > 0 {
			s := modelPick(r.rng, later)
			rjs = append(rjs, r.rejection(Receipt{ID: s.id, Token: s.token}))
			if r.rng.IntN(2) == 0 {
				n := len(rjs)
				rjs[n-2], rjs[n-1] = rjs[n-1], rjs[n-2]
			}
			r.seen["reject-with-later-in-batch"]++
		}
	}
	m.clock++
	res, err := r.b.eng.Reject(r.ctx, rjs)
	r.must(err, "reject")
	var desc []string
	for _, rj := range rjs {
		desc = append(desc, fmt.Sprintf("%s/%d/delay=%v/notattempt=%v/handback=%v", rj.ID, rj.Token, rj.Delay, rj.NotAttempt, rj.HandBack))
	}
	r.logf("reject %s -> %v", strings.Join(desc, " "), res)
	if len(res) != len(rjs) {
		r.fatalf("reject of %d returned %d results", len(rjs), len(res))
	}
	took := map[string]Token{}  // tasks taken back by earlier items of this call: the token of the lease that ended
	tookHB := map[string]bool{} // those a hand-back took back, counted as handed back then
	for i, rj := range rjs {
		want := RejectResult{Err: m.settleErr(rj.Receipt)}
		t := m.tasks[rj.ID]
		if tok, ok := took[rj.ID]; ok && tok == rj.Token {
			// An earlier item of this call took this delivery back: it is pending in its place, and
			// this item's own rejection still applies (the engine's choice: it reports OK, not
			// ErrStaleToken). It settles the delivery once, like any reject: its reason is kept, its
			// attempt counts unless NotAttempt or HandBack, and out of attempts the task is
			// dead-lettered (MaxAttempts n gives at most n counted deliveries); else its delay blocks
			// the partition. A hand-back counts the task as handed back unless a hand-back took it
			// back, which counted it already.
			delete(took, rj.ID)
			want.Err = nil
			if !rj.NotAttempt && !rj.HandBack {
				t.attempts++
			}
			t.lastErr = rj.Reason
			if t.max > 0 && t.attempts >= t.max {
				want.DeadLettered = true
				r.bury(t)
				r.seen["dead-after-taken-back"]++
			} else {
				switch {
				case !rj.HandBack:
					m.c.rejected++
				case !tookHB[rj.ID]:
					m.c.handedBack++
				}
				if rj.Delay > 0 {
					m.parts[t.part].blocked = true
				}
			}
			r.seen["reject-of-taken-back"]++
		} else if want.Err == nil {
			if rj.NotAttempt || rj.HandBack {
				t.attempts--
			}
			t.lastErr = rj.Reason
			if t.max > 0 && t.attempts >= t.max {
				// Dead: the partition goes on, and its later leased tasks stay leased.
				want.DeadLettered = true
				r.bury(t)
				r.seen["dead-by-attempts"]++
			} else {
				later := m.laterLeases(t)
				t.unlease(mPending)
				if rj.HandBack {
					m.c.handedBack++
					r.seen["hand-back"]++
				} else {
					m.c.rejected++
				}
				if t.part.IsOrdered() {
					if rj.Delay > 0 {
						m.parts[t.part].blocked = true
						r.seen["ordered-blocked"]++
					}
					// The contract: the partition's later leased tasks go back too, to their own
					// places, without counting an attempt; their leases end.
					for _, s := range later {
						took[s.id] = s.token
						tookHB[s.id] = rj.HandBack
						s.attempts--
						s.unlease(mPending)
						if rj.HandBack {
							m.c.handedBack++ // a hand-back's tasks count as handed back, not taken back
						} else {
							m.c.takenBack++
						}
						r.seen["reject-took-back-later"]++
					}
				} else {
					t.delayed = rj.Delay > 0
				}
			}
		}
		if res[i].DeadLettered != want.DeadLettered || !modelSameErr(res[i].Err, want.Err) {
			r.fatalf("(8) reject %s token %d: %+v, the model says %+v (model now: %s)", rj.ID, rj.Token, res[i], want,
				r.describe(rj.ID))
		}
		r.count("reject", want.Err)
	}
	m.refresh()
}

// rejection returns a random rejection of rc: now and then with the hour's delay (rarely for an
// ordered task, whose partition it blocks for the rest of the test), as not attempted, or as a
// worker's hand-back.
func (r *modelRun) rejection(rc Receipt) Rejection {
	rj := Rejection{Receipt: rc, Reason: fmt.Sprintf("boom %d", r.step), NotAttempt: r.rng.IntN(4) == 0,
		HandBack: r.rng.IntN(6) == 0}
	if t := r.m.tasks[rc.ID]; t != nil {
		if t.part.IsOrdered() && r.rng.IntN(60) == 0 || !t.part.IsOrdered() && r.rng.IntN(5) == 0 {
			rj.Delay = modelDelay
		}
	}
	return rj
}

// laterLeases returns the leased tasks of t's ordered partition that come after t in its order.
func (m *contractModel) laterLeases(t *mTask) []*mTask {
	if !t.part.IsOrdered() {
		return nil
	}
	return m.list(func(s *mTask) bool { return s.part == t.part && s.state == mLeased && modelRunsBefore(t, s) })
}

// bury moves unleased or leased task t to the dead letters, then trims them to the cap, oldest
// first.
func (r *modelRun) bury(t *mTask) {
	m := r.m
	t.unlease(mDead)
	m.deaths++
	t.died = m.deaths
	m.c.deadLettered++
	if limit := r.cfg.DeadLetterMaxCount; limit > 0 {
		dead := m.deadLetters()
		for _, old := range dead[:max(0, len(dead)-limit)] {
			delete(m.tasks, old.id)
			m.c.trimmed++
			r.seen["trimmed"]++
		}
	}
}

// deadLetters returns the dead letters, oldest first.
func (m *contractModel) deadLetters() []*mTask {
	dead := m.list(mIn(mDead))
	slices.SortFunc(dead, func(a, b *mTask) int { return int(a.died - b.died) })
	return dead
}

func (r *modelRun) opKill() {
	m := r.m
	var fs []Failure
	for _, rc := range r.receipts(1 + r.rng.IntN(2)) {
		fs = append(fs, Failure{Receipt: rc, Reason: fmt.Sprintf("fatal %d", r.step)})
	}
	m.clock++
	errs, err := r.b.eng.Kill(r.ctx, fs)
	r.must(err, "kill")
	rs := make([]Receipt, len(fs))
	for i := range fs {
		rs[i] = fs[i].Receipt
	}
	r.logf("kill %s -> %v", modelReceiptList(rs), errs)
	if len(errs) != len(fs) {
		r.fatalf("kill of %d returned %d results", len(fs), len(errs))
	}
	for i, f := range fs {
		want := m.settleErr(f.Receipt)
		if !modelSameErr(errs[i], want) {
			r.fatalf("(8) kill %s token %d: %v, the model says %v (model: %s)", f.ID, f.Token, errs[i], want, r.describe(f.ID))
		}
		r.count("kill", want)
		if want == nil {
			t := m.tasks[f.ID]
			t.lastErr = f.Reason
			r.bury(t)
		}
	}
	m.refresh()
}

func (r *modelRun) opExtend() {
	rs := r.receipts(1 + r.rng.IntN(3))
	r.m.clock++
	errs, _, err := r.b.eng.Extend(r.ctx, rs, modelDelay)
	r.must(err, "extend")
	r.logf("extend %s -> %v", modelReceiptList(rs), errs)
	if len(errs) != len(rs) {
		r.fatalf("extend of %d returned %d results", len(rs), len(errs))
	}
	for i, rc := range rs {
		if want := r.m.settleErr(rc); !modelSameErr(errs[i], want) {
			r.fatalf("(8) extend %s token %d: %v, the model says %v (model: %s)", rc.ID, rc.Token, errs[i], want, r.describe(rc.ID))
		}
	}
}

func (r *modelRun) opPause() {
	p := r.randPart()
	paused := r.m.part(p).paused
	// Resume a paused partition nine times in ten, pause a running one four times in ten (else a
	// resume that changes nothing): about a third of the partitions are paused at a time.
	r.setPaused(p, paused && r.rng.IntN(10) == 0 || !paused && r.rng.IntN(10) < 4)
}

func (r *modelRun) setPaused(p partition.Key, paused bool) {
	r.m.clock++
	var err error
	if paused {
		err = r.b.eng.Pause(r.ctx, p)
	} else {
		err = r.b.eng.Resume(r.ctx, p)
	}
	r.must(err, "pause/resume")
	r.logf("paused %q = %v", p, paused)
	r.m.part(p).paused = paused
	r.m.refresh()
}

func (r *modelRun) opLimit() {
	if r.rng.IntN(20) == 0 {
		p := modelPick(r.rng, modelOrdered)
		if err := r.b.eng.SetConcurrency(r.ctx, p, 2); !errors.Is(err, ErrInvalid) {
			r.fatalf("SetConcurrency on ordered %q: %v, want ErrInvalid", p, err)
		}
		return
	}
	r.setLimit(modelPick(r.rng, modelUnordered), modelPick(r.rng, []int{0, 0, 1, 2, 3}))
}

func (r *modelRun) setLimit(p partition.Key, limit int) {
	r.m.clock++
	r.must(r.b.eng.SetConcurrency(r.ctx, p, limit), "set concurrency")
	r.logf("limit %q = %d", p, limit)
	r.m.part(p).limit = limit
	r.m.refresh()
}

// someIDs picks k ids: mostly dead letters, else live or pooled ids, sometimes one twice.
func (r *modelRun) someIDs(k int) []string {
	dead := r.m.list(mIn(mDead))
	live := r.m.list(func(t *mTask) bool { return t.state != mDead })
	var ids []string
	for range k {
		switch x := r.rng.IntN(100); {
		case len(ids) > 0 && x < 10:
			ids = append(ids, ids[r.rng.IntN(len(ids))])
		case len(dead) > 0 && x < 75:
			ids = append(ids, modelPick(r.rng, dead).id)
		case len(live) > 0 && x < 88:
			ids = append(ids, modelPick(r.rng, live).id)
		default:
			ids = append(ids, fmt.Sprintf("k%02d", r.rng.IntN(40)))
		}
	}
	return ids
}

func (r *modelRun) opRequeue() {
	m := r.m
	ids := r.someIDs(1 + r.rng.IntN(3))
	m.clock++
	errs, err := r.b.eng.Requeue(r.ctx, ids)
	r.must(err, "requeue")
	r.logf("requeue %v -> %v", ids, errs)
	if len(errs) != len(ids) {
		r.fatalf("requeue of %d returned %d results", len(ids), len(errs))
	}
	for i, id := range ids {
		t := m.tasks[id]
		var want error
		switch {
		case t == nil:
			want = ErrNotFound
		case t.state != mDead:
			want = ErrNotDead
		}
		if !modelSameErr(errs[i], want) {
			r.fatalf("(8) requeue %s: %v, the model says %v (model: %s)", id, errs[i], want, r.describe(id))
		}
		r.count("requeue", want)
		if want == nil {
			m.seq++
			t.state, t.seq, t.delayed, t.attempts, t.died = mPending, m.seq, false, 0, 0
			m.c.requeued++
		}
	}
	m.refresh()
}

func (r *modelRun) opPurge() {
	m := r.m
	ids := r.someIDs(1 + r.rng.IntN(3))
	m.clock++
	n, err := r.b.eng.Purge(r.ctx, ids)
	r.must(err, "purge")
	r.logf("purge %v -> %d", ids, n)
	want := 0
	for _, id := range ids {
		if t := m.tasks[id]; t != nil && t.state == mDead {
			delete(m.tasks, id)
			want++
		}
	}
	m.c.purged += int64(want)
	r.seen["purged"] += want
	if n != want {
		r.fatalf("(8) purge %v deleted %d, the model says %d", ids, n, want)
	}
	m.refresh()
}

// opRecover runs recovery, which must find nothing: no lease expires during the test.
func (r *modelRun) opRecover() {
	rec, err := r.b.eng.Recover(r.ctx)
	r.must(err, "recover")
	r.logf("recover -> %+v", rec)
	if rec != (Recovered{}) {
		r.fatalf("recover returned %+v, but no lease has expired", rec)
	}
}

// drain resumes every partition, lifts every limit, then acks everything leased and fetches and
// acks until nothing can be fetched; every step is checked as in the random phase.
func (r *modelRun) drain() {
	r.logf("drain")
	for _, p := range r.m.partKeys() {
		r.step++
		if r.m.parts[p].paused {
			r.setPaused(p, false)
		}
		if r.m.parts[p].limit > 0 {
			r.setLimit(p, 0)
		}
		r.checkStats()
	}
	for round := 0; ; round++ {
		r.step++
		if round > 5000 {
			r.fatalf("drain does not end")
		}
		if leased := r.m.list(mIn(mLeased)); len(leased) > 0 {
			rs := make([]Receipt, 0, 10)
			for _, t := range leased[:min(10, len(leased))] {
				rs = append(rs, Receipt{ID: t.id, Token: t.token})
			}
			r.ack(rs)
		} else if r.opFetch("drainer", 5) == 0 {
			break
		}
		r.checkStats()
	}
}

// ---------------------------------------------------------------------------------------------
// Checks of the whole state.

// checkStats compares Stats with the model: sizes, ready and scheduled partitions, all counters.
func (r *modelRun) checkStats() {
	m := r.m
	got, err := r.b.eng.Stats(r.ctx)
	r.must(err, "stats")
	got.ServerTime = time.Time{}
	want := Stats{Published: m.c.published, Duplicates: m.c.duplicates, Acked: m.c.acked, Rejected: m.c.rejected,
		DeadLettered: m.c.deadLettered, Requeued: m.c.requeued, Purged: m.c.purged, Trimmed: m.c.trimmed,
		TakenBack: m.c.takenBack, HandedBack: m.c.handedBack}
	for _, t := range m.tasks {
		switch t.state {
		case mPending:
			want.Pending++
		case mLeased:
			want.InFlight++
		case mDead:
			want.Dead++
		}
	}
	sums := m.sums()
	for p, s := range sums {
		if m.canServe(p, s) {
			want.ReadyPartitions++
		}
		if m.scheduled(p, s) {
			want.ScheduledPartitions++
		}
	}
	if got != want {
		r.fatalf("(7) stats differ from the model:\n  engine %+v\n  model  %+v", got, want)
	}
}

// checkFull compares every task's record, the dead letters, the ready and scheduled indexes and
// the queue's keys with the model.
func (r *modelRun) checkFull() {
	m := r.m
	states := map[mState]State{mPending: StatePending, mLeased: StateLeased, mDead: StateDead}
	for _, t := range m.list(func(*mTask) bool { return true }) {
		info, err := r.b.eng.Task(r.ctx, t.id)
		r.must(err, "task "+t.id)
		want := TaskInfo{State: states[t.state], Partition: t.part, Priority: t.prio, Attempts: t.attempts,
			MaxAttempts: t.max, LastError: t.lastErr, Consumer: t.consumer, Token: t.token, Payload: []byte(t.payload)}
		got := TaskInfo{State: info.State, Partition: info.Partition, Priority: info.Priority, Attempts: info.Attempts,
			MaxAttempts: info.MaxAttempts, LastError: info.LastError, Consumer: info.Consumer, Token: info.Token,
			Payload: info.Payload}
		if fmt.Sprint(got) != fmt.Sprint(want) || info.Crashes != 0 || (t.state == mLeased) == info.LeaseEnds.IsZero() {
			r.fatalf("task %s: engine %+v (lease ends %v), model %+v", t.id, got, info.LeaseEnds, want)
		}
	}
	for i := range 40 {
		id := fmt.Sprintf("k%02d", i)
		if m.tasks[id] == nil {
			if _, err := r.b.eng.Task(r.ctx, id); !errors.Is(err, ErrNotFound) {
				r.fatalf("task %s, which the model does not have: %v, want ErrNotFound", id, err)
			}
		}
	}

	page, err := r.b.eng.DeadLetters(r.ctx, 0, 10000)
	r.must(err, "dead letters")
	dead := m.deadLetters()
	if page.Total != len(dead) || len(page.Letters) != len(dead) {
		r.fatalf("dead letters: total %d, listed %d; the model has %d", page.Total, len(page.Letters), len(dead))
	}
	for i, dl := range page.Letters {
		t := m.tasks[dl.ID]
		if t == nil || t.state != mDead {
			r.fatalf("dead letter %s is %s in the model", dl.ID, r.describe(dl.ID))
		}
		if want := dead[len(dead)-1-i]; dl.ID != want.id {
			r.fatalf("dead letter %d (newest first) is %s, the model says %s", i, dl.ID, want.id)
		}
		if dl.Partition != t.part || dl.Priority != t.prio || dl.Attempts != t.attempts || dl.MaxAttempts != t.max ||
			dl.LastError != t.lastErr || string(dl.Payload) != t.payload || !maps.Equal(dl.Headers, t.headers) {
			r.fatalf("dead letter %+v differs from the model's %s", dl, r.describe(dl.ID))
		}
		if i > 0 && dl.DiedAt.After(page.Letters[i-1].DiedAt) {
			r.fatalf("dead letters are not newest first: %s died at %v after %s at %v", dl.ID, dl.DiedAt,
				page.Letters[i-1].ID, page.Letters[i-1].DiedAt)
		}
	}

	k := r.b.eng.Keys()
	ready, err := r.b.client.ZRange(r.ctx, k.Ready(), 0, -1).Result()
	r.must(err, "read ready")
	sched, err := r.b.client.ZRange(r.ctx, k.Sched(), 0, -1).Result()
	r.must(err, "read sched")
	var wantReady, wantSched []string
	sums := m.sums()
	for _, p := range m.partKeys() {
		if m.canServe(p, sums[p]) {
			wantReady = append(wantReady, string(p))
		}
		if m.scheduled(p, sums[p]) {
			wantSched = append(wantSched, string(p))
		}
	}
	slices.Sort(ready)
	slices.Sort(sched)
	if !slices.Equal(ready, wantReady) || !slices.Equal(sched, wantSched) {
		r.fatalf("ready %q and scheduled %q partitions; the model says %q and %q", ready, sched, wantReady, wantSched)
	}
	r.checkKeys()
}

// checkKeys compares the queue's keys with the ones the model's state needs: the fixed keys, a
// record per task, a pending set per partition and priority in use, controls for paused, limited
// or blocked partitions, a hold set per partition with holding leases, and nothing else.
func (r *modelRun) checkKeys() {
	m := r.m
	k := r.b.eng.Keys()
	got, err := r.b.client.Keys(r.ctx, redistest.GlobEscape(k.Base())+"*").Result()
	r.must(err, "list keys")
	optional := map[string]bool{k.Stats(): true, k.Seq(): true, k.Wake(): true, k.Dedup(): true, k.Ctl(): true,
		k.Consumers(): true, k.PausedPartitions(): true}
	need := map[string]bool{}
	sums := m.sums()
	for _, t := range m.tasks {
		need[k.Task(t.id)] = true
		switch t.state {
		case mLeased:
			need[k.Inflight()] = true
			need[k.Leases()] = true
		case mDead:
			need[k.Dead()] = true
		}
	}
	for p, s := range sums {
		ps := m.parts[p]
		if s.pending > 0 {
			need[k.Depth()] = true
			need[k.Heads()] = true
		}
		for prio := range s.prios {
			need[k.Pending(p, prio)] = true
			// Only non-zero levels are recorded, in r:<p>, and such partitions in prio.
			if prio != 0 {
				need[k.Levels(p)] = true
				need[k.Prio()] = true
			}
		}
		if ps.paused || ps.limit > 0 || ps.blocked {
			need[k.Meta(p)] = true
		}
		if s.tracked > 0 {
			need[k.Held(p)] = true
		}
		if m.canServe(p, s) {
			need[k.Ready()] = true
		}
		if m.scheduled(p, s) {
			need[k.Sched()] = true
		}
	}
	var extra, missing []string
	for _, key := range got {
		if !need[key] && !optional[key] {
			extra = append(extra, key)
		}
		delete(need, key)
	}
	for key := range need {
		missing = append(missing, key)
	}
	slices.Sort(extra)
	slices.Sort(missing)
	if len(extra) > 0 || len(missing) > 0 {
		r.fatalf("(9) keys differ from the model's state: left over %q, missing %q", extra, missing)
	}
	r.checkLevels(sums)
	r.checkIndexes(sums)
}

// checkLevels checks the level sets: prio names exactly the partitions with pending tasks at a
// non-zero priority, and r:<p> holds exactly those priorities (level 0 is never recorded).
func (r *modelRun) checkLevels(sums map[partition.Key]*mSum) {
	k := r.b.eng.Keys()
	got, err := r.b.client.SMembers(r.ctx, k.Prio()).Result()
	r.must(err, "read prio")
	slices.Sort(got)
	var want []string
	for p, s := range sums {
		var levels []string
		for prio := range s.prios {
			if prio != 0 {
				levels = append(levels, strconv.Itoa(prio))
			}
		}
		if len(levels) == 0 {
			continue
		}
		want = append(want, string(p))
		have, err := r.b.client.ZRange(r.ctx, k.Levels(p), 0, -1).Result()
		r.must(err, "read levels")
		slices.Sort(have)
		slices.Sort(levels)
		if !slices.Equal(have, levels) {
			r.fatalf("levels of %q are %q; the model says %q", p, have, levels)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		r.fatalf("prio holds %q; the model says %q", got, want)
	}
}

// checkIndexes checks the partition indexes the Inspector reads: depth holds exactly the
// partitions with pending tasks, scored by their number, and heads the same partitions, scored by
// the earliest available-at among the heads of their pending sets.
func (r *modelRun) checkIndexes(sums map[partition.Key]*mSum) {
	k := r.b.eng.Keys()
	depth, err := r.b.client.ZRangeWithScores(r.ctx, k.Depth(), 0, -1).Result()
	r.must(err, "read depth")
	heads, err := r.b.client.ZRangeWithScores(r.ctx, k.Heads(), 0, -1).Result()
	r.must(err, "read heads")
	gotDepth, gotHeads := map[partition.Key]int{}, map[partition.Key]float64{}
	for _, z := range depth {
		gotDepth[partition.Key(z.Member.(string))] = int(z.Score)
	}
	for _, z := range heads {
		gotHeads[partition.Key(z.Member.(string))] = z.Score
	}
	wantDepth, wantHeads := map[partition.Key]int{}, map[partition.Key]float64{}
	for p, s := range sums {
		if s.pending == 0 {
			continue
		}
		wantDepth[p] = s.pending
		first := -1.0
		for prio := range s.prios {
			head, err := r.b.client.ZRangeWithScores(r.ctx, k.Pending(p, prio), 0, 0).Result()
			r.must(err, "read pending head")
			if len(head) == 1 && (first < 0 || head[0].Score < first) {
				first = head[0].Score
			}
		}
		wantHeads[p] = first
	}
	if !maps.Equal(gotDepth, wantDepth) {
		r.fatalf("depth index %v, the model's pending counts %v", gotDepth, wantDepth)
	}
	if !maps.Equal(gotHeads, wantHeads) {
		r.fatalf("heads index %v, the pending sets' earliest heads %v", gotHeads, wantHeads)
	}
}

// ---------------------------------------------------------------------------------------------
// Helpers.

func modelSameErr(got, want error) bool {
	if want == nil {
		return got == nil
	}
	return errors.Is(got, want)
}

func (r *modelRun) count(op string, err error) {
	switch {
	case err == nil:
		r.seen[op+"-ok"]++
	case errors.Is(err, ErrStaleToken):
		r.seen[op+"-stale"]++
	case errors.Is(err, ErrNotFound):
		r.seen[op+"-notfound"]++
	case errors.Is(err, ErrNotDead):
		r.seen[op+"-notdead"]++
	}
}

func (r *modelRun) describe(id string) string {
	t := r.m.tasks[id]
	if t == nil {
		return "absent"
	}
	return fmt.Sprintf("%s of %q prio %d seq %d delayed %v attempts %d/%d token %d", t.state, t.part, t.prio, t.seq,
		t.delayed, t.attempts, t.max, t.token)
}

func (r *modelRun) leasesOf(p partition.Key) []string {
	var out []string
	for _, t := range r.m.list(func(t *mTask) bool { return t.part == p && t.state == mLeased }) {
		out = append(out, t.id)
	}
	return out
}

// order lists p's pending tasks in the order the contract runs them.
func (r *modelRun) order(p partition.Key) []string {
	ts := r.m.list(func(t *mTask) bool { return t.part == p && t.state == mPending })
	slices.SortFunc(ts, func(a, b *mTask) int {
		switch {
		case a.delayed != b.delayed:
			return map[bool]int{true: 1, false: -1}[a.delayed]
		case modelRunsBefore(a, b):
			return -1
		case modelRunsBefore(b, a):
			return 1
		}
		return 0
	})
	var out []string
	for _, t := range ts {
		s := fmt.Sprintf("%s(p%d)", t.id, t.prio)
		if t.delayed {
			s += "(1h)"
		}
		out = append(out, s)
	}
	return out
}

func modelReceiptList(rs []Receipt) string {
	var out []string
	for _, rc := range rs {
		out = append(out, fmt.Sprintf("%s/%d", rc.ID, rc.Token))
	}
	return strings.Join(out, " ")
}

// TestModelRejectTakenBackInSameCall pins down the model's rule for a reject item that names a task
// an earlier item of the same call already took back (the rest of an ordered run after a rejected
// task goes back with it). The engine reports OK for such an item and keeps its own reason, attempt
// and delay; like any settle, the item must still carry the token of the delivery it settles, settle
// it once, and dead-letter the task when that attempt was its last.
func TestModelRejectTakenBackInSameCall(t *testing.T) {
	t.Parallel()
	p := partition.Ordered("p")
	// run publishes a and b (b with max attempts maxB) to p, leases both to one consumer and
	// rejects them with rjs(a, b).
	run := func(t *testing.T, maxB int, rjs func(a, b Delivery) []Rejection) (*bundle, []RejectResult) {
		b := setup(t, Config{})
		b.publish(Message{ID: "a", Partition: p}, Message{ID: "b", Partition: p, MaxAttempts: maxB})
		ds := b.fetch("c", 2)
		if len(ds) != 2 || ds[0].ID != "a" || ds[1].ID != "b" {
			t.Fatalf("fetch: %+v, want a then b", ds)
		}
		res, err := b.eng.Reject(b.ctx, rjs(ds[0], ds[1]))
		if err != nil {
			t.Fatal(err)
		}
		return b, res
	}
	check := func(t *testing.T, b *bundle, res []RejectResult, want []RejectResult, attemptsB int, state State) {
		t.Helper()
		if len(res) != len(want) {
			t.Fatalf("results %+v, want %+v", res, want)
		}
		for i := range want {
			if res[i].DeadLettered != want[i].DeadLettered || !modelSameErr(res[i].Err, want[i].Err) {
				t.Errorf("result %d: %+v, want %+v", i, res[i], want[i])
			}
		}
		info, err := b.eng.Task(b.ctx, "b")
		if err != nil || info.Attempts != attemptsB || info.State != state {
			t.Errorf("b afterwards: %s with %d attempts (%v), want %s with %d", info.State, info.Attempts, err, state,
				attemptsB)
		}
	}
	t.Run("its last attempt dead-letters it", func(t *testing.T) {
		t.Parallel()
		// MaxAttempts 1 gives at most one counted delivery: b's rejection counts and was its last.
		b, res := run(t, 1, func(a, bb Delivery) []Rejection {
			return []Rejection{{Receipt: a.Receipt()}, {Receipt: bb.Receipt()}}
		})
		check(t, b, res, []RejectResult{{}, {DeadLettered: true}}, 1, StateDead)
		// Dead, b left p's pending set, where a's rejection had put it back.
		for _, m := range b.client.ZRange(b.ctx, b.eng.Keys().Pending(p, 0), 0, -1).Val() {
			if m[seqDigits:] == "b" {
				t.Errorf("dead b is still in the pending set of %s: %s", p, m)
			}
		}
		for _, d := range b.drain("c") {
			if d == "b" {
				t.Errorf("b, with MaxAttempts 1, was delivered a second time")
			}
		}
	})
	t.Run("a wrong token is stale and changes nothing", func(t *testing.T) {
		t.Parallel()
		b, res := run(t, 0, func(a, bb Delivery) []Rejection {
			forged := Receipt{ID: bb.ID, Token: bb.Token + 1000}
			return []Rejection{{Receipt: a.Receipt()}, {Receipt: forged, Reason: "forged", Delay: time.Hour}}
		})
		check(t, b, res, []RejectResult{{}, {Err: ErrStaleToken}}, 0, StatePending)
		if s := b.stats(); s.ReadyPartitions != 1 {
			t.Errorf("the forged item blocked the partition: %+v", s)
		}
	})
	t.Run("named twice, it settles once", func(t *testing.T) {
		t.Parallel()
		b, res := run(t, 0, func(a, bb Delivery) []Rejection {
			return []Rejection{{Receipt: a.Receipt()}, {Receipt: bb.Receipt()}, {Receipt: bb.Receipt()}}
		})
		check(t, b, res, []RejectResult{{}, {}, {Err: ErrStaleToken}}, 1, StatePending)
	})
}
