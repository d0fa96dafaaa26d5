package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// TestInvariantsInServerTime runs random operations in real (server) time, with short delays and leases, so
// that delayed tasks fall due, blocks from rejects expire and leases expire and are recovered, which
// TestModel (time stands still) never sees. After every step it derives what must hold from the
// queue's own keys: each partition is in ready, in sched at exactly its due time, or in neither
// exactly when it is empty, paused or held; depth, heads, levels, leases, held sets and the pending
// counter agree with the pending sets; ordered tasks keep their available-at and sequence except on
// requeue. Each fetch is checked for order inside ordered partitions, exclusivity and growing tokens;
// each settle for the result the lease state before it implies. SRQ_INVARIANTS_SEED replays a run.
func TestInvariantsInServerTime(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	if s := os.Getenv("SRQ_INVARIANTS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	steps := 400
	if testing.Short() {
		steps = 100
	}
	// A check after each step reads every key of the queue: slow on the embedded Redis.
	steps = redistest.Size(t, steps, min(steps, 100))
	if s := os.Getenv("SRQ_INVARIANTS_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	t.Logf("seed %d", seed)
	for i, cfg := range []Config{{RecoverChunk: 3}, {RecoverChunk: 2, MaxOrderedRun: 2, DeadLetterMaxCount: 4}, {}} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			b := setup(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			t.Cleanup(cancel)
			b.ctx = ctx
			parts := invParts
			if i == 2 { // ordered only: long runs, rejects inside runs
				parts = invParts[:2]
			}
			r := &invRun{b: b, parts: parts, rng: rand.New(rand.NewPCG(seed, uint64(i))), snap: map[string]invKey{}}
			r.run(steps)
		})
	}
}

var (
	invParts = []partition.Key{"!a", "!b", "!c", "x", "y", partition.Base}
	invPrios = []int{0, 0, 0, 3, -2}
)

type invKey struct{ r, t, s string }

type invRun struct {
	b        *bundle
	parts    []partition.Key
	rng      *rand.Rand
	live     []Delivery
	snap     map[string]invKey // ordered tasks: priority, available-at, sequence as published
	maxToken Token
	log      []string
}

func (r *invRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
	if len(r.log) > 40 {
		r.log = r.log[1:]
	}
}

func (r *invRun) fatalf(format string, args ...any) {
	r.b.t.Helper()
	r.b.t.Fatalf("%s\nlast operations:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.log, "\n  "))
}

func (r *invRun) nowMs() int64 { return r.b.serverNow().UnixMilli() }

func (r *invRun) run(steps int) {
	for i := range steps {
		switch k := r.rng.IntN(100); {
		case k < 22:
			r.opPublish()
		case k < 44:
			r.opFetch()
		case k < 52:
			r.opAck()
		case k < 64:
			r.opReject()
		case k < 68:
			r.opExtend()
		case k < 71:
			r.opKill()
		case k < 78:
			r.opRecover()
		case k < 81:
			r.opRequeue()
		case k < 82:
			r.opPurge()
		case k < 86:
			r.opPause()
		case k < 87:
			r.opQueuePause()
		case k < 90:
			r.opLimit()
		case k < 93:
			r.opRunNow()
		default:
			d := time.Duration(r.rng.IntN(40)) * time.Millisecond
			r.logf("sleep %v", d)
			time.Sleep(d)
		}
		r.check(fmt.Sprintf("step %d", i))
	}
	r.drain()
}

func (r *invRun) opPublish() {
	b := r.b
	n := 1 + r.rng.IntN(4)
	msgs := make([]Message, n)
	for i := range msgs {
		m := Message{Partition: r.parts[r.rng.IntN(len(r.parts))], Priority: invPrios[r.rng.IntN(len(invPrios))]}
		if r.rng.IntN(4) > 0 {
			m.ID = "t" + strconv.Itoa(r.rng.IntN(150))
		}
		switch k := r.rng.IntN(10); {
		case k < 3:
			m.Delay = time.Duration(1+r.rng.IntN(60)) * time.Millisecond
		case k < 4:
			m.At = b.serverNow().Add(-time.Duration(r.rng.IntN(100)) * time.Millisecond)
		}
		if r.rng.IntN(3) == 0 {
			m.MaxAttempts = 1 + r.rng.IntN(3)
		}
		msgs[i] = m
	}
	res, err := b.eng.Publish(b.ctx, msgs)
	if err != nil {
		r.fatalf("publish: %v", err)
	}
	var s []string
	for i, x := range res {
		s = append(s, fmt.Sprintf("%s@%s/p%d/d%v/dup=%v", x.ID, msgs[i].Partition, msgs[i].Priority, msgs[i].Delay, x.Duplicate))
		if !x.Duplicate {
			r.snapshot(x.ID)
		}
	}
	r.logf("publish %v", s)
}

// snapshot records an ordered task's priority, available-at and sequence.
func (r *invRun) snapshot(id string) {
	f, err := r.b.client.HMGet(r.b.ctx, r.b.eng.Keys().Task(id), "p", "r", "t", "s", "c").Result()
	if err != nil {
		r.fatalf("snapshot %s: %v", id, err)
	}
	p, _ := f[0].(string)
	if !partition.Key(p).IsOrdered() {
		delete(r.snap, id)
		return
	}
	rr, _ := f[1].(string)
	tt, _ := f[2].(string)
	ss, _ := f[3].(string)
	ss = padSequence(ss)
	if tt == "" {
		tt, _ = f[4].(string) // available when published: no t
	}
	if rr == "" {
		rr = "0"
	}
	r.snap[id] = invKey{rr, tt, ss}
}

// leaseOf returns the current token of id's lease ("" when none) and whether its record exists.
func (r *invRun) leaseOf(id string) (string, bool) {
	b := r.b
	v, err := b.client.HGet(b.ctx, b.eng.Keys().Leases(), id).Result()
	if err != nil {
		v = ""
	}
	n, _ := b.client.Exists(b.ctx, b.eng.Keys().Task(id)).Result()
	if len(v) >= 20 {
		v = v[:20]
	}
	return v, n == 1
}

// expectSettle is the result of settling rc as the only item naming its task.
func (r *invRun) expectSettle(rc Receipt) error {
	tok, exists := r.leaseOf(rc.ID)
	switch {
	case !exists:
		return ErrNotFound
	case tok != rc.Token.String():
		return ErrStaleToken
	}
	return nil
}

func (r *invRun) pickLive(k int) []Delivery {
	if len(r.live) == 0 {
		return nil
	}
	var out []Delivery
	for range k {
		i := r.rng.IntN(len(r.live))
		if r.rng.IntN(5) > 0 { // mostly the latest deliveries, whose leases are likely current
			i = max(0, len(r.live)-1-r.rng.IntN(6))
		}
		out = append(out, r.live[i])
	}
	return out
}

func (r *invRun) opFetch() {
	b := r.b
	consumer := "c" + strconv.Itoa(r.rng.IntN(3))
	n := 1 + r.rng.IntN(4)
	lease := time.Duration(60+r.rng.IntN(500)) * time.Millisecond
	before := r.readState()
	nowBefore := r.nowMs()
	var ds []Delivery
	var err error
	ackfetch := r.rng.IntN(5) == 0 && len(r.live) > 0
	if ackfetch {
		rs, want := r.ackExpect(r.pickLive(1 + r.rng.IntN(2)))
		var errs []error
		errs, ds, _, err = b.eng.AckFetch(b.ctx, rs, consumer, n, lease)
		if err != nil {
			r.fatalf("ackfetch: %v", err)
		}
		r.logf("ackfetch acks=%v -> %v", receiptStrings(rs), errs)
		for i := range errs {
			if errs[i] != want[i] {
				r.fatalf("ackfetch: ack %s tok %d: got %v want %v", rs[i].ID, rs[i].Token, errs[i], want[i])
			}
		}
	} else {
		ds, err = b.eng.Fetch(b.ctx, consumer, n, lease)
		if err != nil {
			r.fatalf("fetch: %v", err)
		}
	}
	nowAfter := r.nowMs()
	var s []string
	for _, d := range ds {
		s = append(s, fmt.Sprintf("%s@%s/p%d tok=%d a=%d", d.ID, d.Partition, d.Priority, d.Token, d.Attempt))
	}
	r.logf("fetch %s n=%d lease=%v -> %v", consumer, n, lease, s)
	after := r.readState()
	runs := map[string][]Delivery{}
	for _, d := range ds {
		if d.Token <= r.maxToken {
			r.fatalf("token %d of %s not above %d", d.Token, d.ID, r.maxToken)
		}
		r.maxToken = d.Token
		if d.AvailableAt.UnixMilli() > nowAfter {
			r.fatalf("%s handed out before its available-at %v (server now %d)", d.ID, d.AvailableAt, nowAfter)
		}
		runs[string(d.Partition)] = append(runs[string(d.Partition)], d)
	}
	for p, run := range runs {
		if ackfetch {
			break // the state between the acks and the fetch is not seen
		}
		if !partition.Key(p).IsOrdered() {
			// Unordered partitions hand out by the same rule; their tasks may come from several turns.
			for _, d := range run {
				x := before.tasks[d.ID]
				if x == nil {
					r.fatalf("fetched %s was not pending", d.ID)
				}
				for _, y := range after.pending[p] {
					if y.t <= nowBefore && invBefore(y, x) {
						r.fatalf("fetch of %s handed out %s, but available %s comes first (%+v vs %+v)", p, x.id, y.id, *y, *x)
					}
				}
			}
			continue
		}
		if len(before.heldBy(p)) > 0 {
			r.fatalf("fetch leased from ordered %s while %v were leased", p, before.heldBy(p))
		}
		if bl := before.meta[p]["b"]; bl != "" {
			if v, _ := strconv.ParseInt(bl, 10, 64); v > nowAfter {
				r.fatalf("fetch served %s blocked until %d (now %d)", p, v, nowAfter)
			}
		}
		if before.meta[p]["ps"] != "" {
			r.fatalf("fetch served paused %s", p)
		}
		var prev *invTask
		for _, d := range run {
			tk := before.tasks[d.ID]
			if tk == nil {
				r.fatalf("fetched %s was not pending", d.ID)
			}
			if prev != nil && !invBefore(prev, tk) {
				r.fatalf("run of %s out of order: %s before %s", p, prev.id, tk.id)
			}
			prev = tk
		}
		for _, y := range after.pending[p] {
			if y.t <= nowBefore && invBefore(y, prev) {
				r.fatalf("fetch of %s handed out %s, but available %s comes first (%+v vs %+v)", p, prev.id, y.id, *y, *prev)
			}
		}
	}
	if len(ds) > 0 {
		r.live = append(r.live, ds...)
		if len(r.live) > 60 {
			r.live = r.live[len(r.live)-60:]
		}
	}
}

func receiptStrings(rs []Receipt) []string {
	var s []string
	for _, x := range rs {
		s = append(s, fmt.Sprintf("%s/%d", x.ID, x.Token))
	}
	return s
}

// ackExpect returns the receipts of ds and the result each ack must have: a repeat of an id the
// call acked already finds it gone.
func (r *invRun) ackExpect(ds []Delivery) ([]Receipt, []error) {
	rs := make([]Receipt, len(ds))
	want := make([]error, len(ds))
	done := map[string]bool{}
	for i, d := range ds {
		rs[i] = d.Receipt()
		if done[d.ID] {
			want[i] = ErrNotFound
			continue
		}
		want[i] = r.expectSettle(rs[i])
		if want[i] == nil {
			done[d.ID] = true
		}
	}
	return rs, want
}

func (r *invRun) opAck() {
	b := r.b
	ds := r.pickLive(1 + r.rng.IntN(3))
	if ds == nil {
		return
	}
	rs, want := r.ackExpect(ds)
	errs, err := b.eng.Ack(b.ctx, rs)
	if err != nil {
		r.fatalf("ack: %v", err)
	}
	r.logf("ack %v -> %v", receiptStrings(rs), errs)
	for i := range errs {
		if errs[i] != want[i] {
			r.fatalf("ack %s: got %v want %v", rs[i].ID, errs[i], want[i])
		}
	}
}

func (r *invRun) opReject() {
	b := r.b
	ds := r.pickLive(1 + r.rng.IntN(2))
	if ds == nil {
		return
	}
	rjs := make([]Rejection, len(ds))
	pre := make([]error, len(ds))
	for i, d := range ds {
		rjs[i] = Rejection{Receipt: d.Receipt(), Reason: "r" + strconv.Itoa(i)}
		if r.rng.IntN(3) == 0 {
			rjs[i].Delay = time.Duration(1+r.rng.IntN(40)) * time.Millisecond
		}
		rjs[i].NotAttempt = r.rng.IntN(4) == 0
		pre[i] = r.expectSettle(rjs[i].Receipt)
	}
	res, err := b.eng.Reject(b.ctx, rjs)
	if err != nil {
		r.fatalf("reject: %v", err)
	}
	var s []string
	for i, x := range res {
		s = append(s, fmt.Sprintf("%s/%d d=%v na=%v -> %v dead=%v", rjs[i].ID, rjs[i].Token, rjs[i].Delay, rjs[i].NotAttempt, x.Err, x.DeadLettered))
	}
	r.logf("reject %v", s)
	for i, x := range res {
		if pre[i] != nil && x.Err == nil {
			r.fatalf("reject %s succeeded with a token stale before the call (%v)", rjs[i].ID, pre[i])
		}
		if len(ds) == 1 && x.Err != pre[i] {
			r.fatalf("reject %s: got %v want %v", rjs[i].ID, x.Err, pre[i])
		}
	}
}

func (r *invRun) opExtend() {
	b := r.b
	ds := r.pickLive(1 + r.rng.IntN(2))
	if ds == nil {
		return
	}
	rs := make([]Receipt, len(ds))
	want := make([]error, len(ds))
	for i, d := range ds {
		rs[i] = d.Receipt()
		want[i] = r.expectSettle(rs[i])
	}
	errs, _, err := b.eng.Extend(b.ctx, rs, time.Duration(50+r.rng.IntN(150))*time.Millisecond)
	if err != nil {
		r.fatalf("extend: %v", err)
	}
	r.logf("extend %v -> %v", receiptStrings(rs), errs)
	for i := range errs {
		if errs[i] != want[i] {
			r.fatalf("extend %s: got %v want %v", rs[i].ID, errs[i], want[i])
		}
	}
}

func (r *invRun) opKill() {
	b := r.b
	ds := r.pickLive(1)
	if ds == nil {
		return
	}
	rc := ds[0].Receipt()
	want := r.expectSettle(rc)
	errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: rc, Reason: "killed"}})
	if err != nil {
		r.fatalf("kill: %v", err)
	}
	r.logf("kill %s/%d -> %v", rc.ID, rc.Token, errs)
	if errs[0] != want {
		r.fatalf("kill %s: got %v want %v", rc.ID, errs[0], want)
	}
}

func (r *invRun) opRecover() {
	rec, err := r.b.eng.RecoverAll(r.b.ctx)
	if err != nil {
		r.fatalf("recover: %v", err)
	}
	r.logf("recover -> %+v", rec)
}

func (r *invRun) deadIDs() []string {
	ids, _ := r.b.client.ZRange(r.b.ctx, r.b.eng.Keys().Dead(), 0, -1).Result()
	return ids
}

func (r *invRun) opRequeue() {
	dead := r.deadIDs()
	if len(dead) == 0 {
		return
	}
	ids := []string{dead[r.rng.IntN(len(dead))]}
	if r.rng.IntN(3) == 0 {
		ids = append(ids, "t"+strconv.Itoa(r.rng.IntN(50)))
	}
	errs, err := r.b.eng.Requeue(r.b.ctx, ids)
	if err != nil {
		r.fatalf("requeue: %v", err)
	}
	r.logf("requeue %v -> %v", ids, errs)
	for i, id := range ids {
		if errs[i] == nil {
			r.snapshot(id)
		}
	}
}

// opRunNow makes a task available now (RunNow): a pending one moves to now if delayed, and an
// ordered partition blocked by a delayed reject goes on; others answer ErrNotFound or
// ErrNotPending.
func (r *invRun) opRunNow() {
	ids := []string{"t" + strconv.Itoa(r.rng.IntN(150))}
	for id := range r.snap { // an ordered task, often delayed or blocked
		if r.rng.IntN(2) == 0 {
			ids = append(ids, id)
			break
		}
	}
	errs, err := r.b.eng.RunNow(r.b.ctx, ids)
	if err != nil {
		r.fatalf("run now: %v", err)
	}
	r.logf("run now %v -> %v", ids, errs)
	for i, id := range ids {
		switch {
		case errs[i] == nil:
			r.snapshot(id) // its available-at moved: its place in its partition's order too
		case !errors.Is(errs[i], ErrNotFound) && !errors.Is(errs[i], ErrNotPending):
			r.fatalf("run now %s: %v", id, errs[i])
		}
	}
}

func (r *invRun) opPurge() {
	dead := r.deadIDs()
	if len(dead) == 0 {
		return
	}
	id := dead[r.rng.IntN(len(dead))]
	n, err := r.b.eng.Purge(r.b.ctx, []string{id})
	if err != nil || n != 1 {
		r.fatalf("purge %s: %d %v", id, n, err)
	}
	delete(r.snap, id)
	r.logf("purge %s", id)
}

func (r *invRun) opPause() {
	p := r.parts[r.rng.IntN(len(r.parts))]
	var err error
	if r.rng.IntN(2) == 0 {
		err = r.b.eng.Pause(r.b.ctx, p)
		r.logf("pause %s", p)
	} else {
		err = r.b.eng.Resume(r.b.ctx, p)
		r.logf("resume %s", p)
	}
	if err != nil {
		r.fatalf("pause/resume: %v", err)
	}
}

func (r *invRun) opQueuePause() {
	var err error
	if r.rng.IntN(2) == 0 {
		err = r.b.eng.PauseQueue(r.b.ctx)
		r.logf("pause queue")
	} else {
		err = r.b.eng.ResumeQueue(r.b.ctx)
		r.logf("resume queue")
	}
	if err != nil {
		r.fatalf("queue pause: %v", err)
	}
}

func (r *invRun) opLimit() {
	p := partition.Key([]string{"x", "y"}[r.rng.IntN(2)])
	n := r.rng.IntN(3)
	if err := r.b.eng.SetConcurrency(r.b.ctx, p, n); err != nil {
		r.fatalf("limit: %v", err)
	}
	r.logf("limit %s %d", p, n)
}

// invTask is a pending task as its pending set holds it.
type invTask struct {
	id   string
	prio int
	t    int64
	seq  string
}

func invBefore(a, b *invTask) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

type invState struct {
	pending  map[string][]*invTask
	tasks    map[string]*invTask // every pending task
	held     map[string][]string
	meta     map[string]map[string]string
	ready    map[string]float64
	sched    map[string]float64
	depth    map[string]float64
	heads    map[string]float64
	inflight map[string]float64
	leases   map[string]string
	dead     map[string]float64
	levels   map[string][]string
	prio     []string
	ctl      []string
	records  map[string]map[string]string
}

func (s invState) heldBy(p string) []string {
	var out []string
	for id, v := range s.leases {
		if s.records[id]["p"] == p {
			out = append(out, id+"/"+v[:20])
		}
	}
	return out
}

func (r *invRun) readState() invState {
	b := r.b
	ctx, c, k := b.ctx, b.client, b.eng.Keys()
	s := invState{pending: map[string][]*invTask{}, tasks: map[string]*invTask{}, held: map[string][]string{},
		meta: map[string]map[string]string{}, levels: map[string][]string{}, records: map[string]map[string]string{}}
	zmap := func(key string) map[string]float64 {
		zs, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			r.fatalf("read %s: %v", key, err)
		}
		m := map[string]float64{}
		for _, z := range zs {
			m[z.Member.(string)] = z.Score
		}
		return m
	}
	s.ready, s.sched, s.depth, s.heads = zmap(k.Ready()), zmap(k.Sched()), zmap(k.Depth()), zmap(k.Heads())
	s.inflight, s.dead = zmap(k.Inflight()), zmap(k.Dead())
	s.leases, _ = c.HGetAll(ctx, k.Leases()).Result()
	s.prio, _ = c.SMembers(ctx, k.Prio()).Result()
	s.ctl, _ = c.SMembers(ctx, k.Ctl()).Result()
	keys, err := c.Keys(ctx, redistest.GlobEscape(k.Base())+"*").Result()
	if err != nil {
		r.fatalf("keys: %v", err)
	}
	for _, key := range keys {
		rest := strings.TrimPrefix(key, k.Base())
		switch {
		case strings.HasPrefix(rest, "q:"):
			l, p, _ := strings.Cut(rest[2:], ":")
			prio, _ := strconv.Atoi(l)
			zs, _ := c.ZRangeWithScores(ctx, key, 0, -1).Result()
			for _, z := range zs {
				m := z.Member.(string)
				tk := &invTask{id: m[20:], prio: prio, t: int64(z.Score), seq: m[:20]}
				s.pending[p] = append(s.pending[p], tk)
				if s.tasks[tk.id] != nil {
					r.fatalf("task %s pending twice", tk.id)
				}
				s.tasks[tk.id] = tk
			}
		case strings.HasPrefix(rest, "l:"):
			s.held[rest[2:]], _ = c.SMembers(ctx, key).Result()
		case strings.HasPrefix(rest, "m:"):
			s.meta[rest[2:]], _ = c.HGetAll(ctx, key).Result()
		case strings.HasPrefix(rest, "r:"):
			s.levels[rest[2:]], _ = c.ZRange(ctx, key, 0, -1).Result()
		case strings.HasPrefix(rest, "t:"):
			if s.records[rest[2:]], err = c.HGetAll(ctx, key).Result(); err != nil {
				r.fatalf("read %s: %v", key, err)
			}
		}
	}
	return s
}

// check derives from the queue's keys what must hold, and fails when it does not.
func (r *invRun) check(step string) {
	b := r.b
	now := r.nowMs()
	s := r.readState()
	parts := map[string]bool{}
	for _, m := range []map[string]float64{s.ready, s.sched, s.depth, s.heads} {
		for p := range m {
			parts[p] = true
		}
	}
	for p := range s.pending {
		parts[p] = true
	}
	for p := range s.held {
		parts[p] = true
	}
	for p := range s.meta {
		parts[p] = true
	}
	// Leases, inflight, held sets.
	if len(s.leases) != len(s.inflight) {
		r.fatalf("%s: %d leases, %d in inflight", step, len(s.leases), len(s.inflight))
	}
	leasedIn := map[string][]string{}
	for id, v := range s.leases {
		if _, ok := s.inflight[id]; !ok {
			r.fatalf("%s: lease of %s not in inflight", step, id)
		}
		rec := s.records[id]
		if rec == nil {
			r.fatalf("%s: lease of %s without a record", step, id)
		}
		if rec["S"] == "d" || s.tasks[id] != nil {
			r.fatalf("%s: leased %s is also dead or pending", step, id)
		}
		p := rec["p"]
		tracked := v[20] == 't'
		if partition.Key(p).IsOrdered() && !tracked {
			r.fatalf("%s: lease of ordered %s untracked", step, id)
		}
		if tracked {
			leasedIn[p] = append(leasedIn[p], id)
		}
	}
	for p := range parts {
		got := slices.Sorted(slices.Values(s.held[p]))
		want := slices.Sorted(slices.Values(leasedIn[p]))
		if !slices.Equal(got, want) {
			r.fatalf("%s: held set of %s is %v, tracked leases %v", step, p, got, want)
		}
	}
	// Records: every record is pending, leased or dead, exactly once.
	total := 0
	for id, rec := range s.records {
		_, leased := s.leases[id]
		_, dead := s.dead[id]
		pend := s.tasks[id] != nil
		n := 0
		for _, x := range []bool{leased, dead, pend} {
			if x {
				n++
			}
		}
		if n != 1 {
			r.fatalf("%s: task %s is leased=%v dead=%v pending=%v", step, id, leased, dead, pend)
		}
		if dead != (rec["S"] == "d") {
			r.fatalf("%s: task %s dead=%v but state %q", step, id, dead, rec["S"])
		}
		at := cmpOr(rec["t"], rec["c"]) // a task available when published has no t
		if pend {
			tk := s.tasks[id]
			if _, ok := rec["p"]; !ok || padSequence(rec["s"]) != tk.seq || at != strconv.FormatInt(tk.t, 10) {
				r.fatalf("%s: pending %s record %v, member seq %s at %d", step, id, rec, tk.seq, tk.t)
			}
			total++
		}
		if want, ok := r.snap[id]; ok && !dead {
			got := invKey{cmpOr(rec["r"], "0"), at, padSequence(rec["s"])}
			if got != want {
				r.fatalf("%s: ordered %s moved: priority/at/seq %v, was %v", step, id, got, want)
			}
		}
	}
	st := b.stats()
	if st.Pending != int64(total) || st.InFlight != int64(len(s.inflight)) || st.Dead != int64(len(s.dead)) {
		r.fatalf("%s: stats pending %d inflight %d dead %d; keys hold %d, %d, %d", step, st.Pending, st.InFlight,
			st.Dead, total, len(s.inflight), len(s.dead))
	}
	// Partitions.
	var prioWant []string
	var ctlWant []string
	for p := range parts {
		meta := s.meta[p]
		if len(meta) > 0 {
			ctlWant = append(ctlWant, p)
		}
		var levels []string
		ts := s.pending[p]
		var earliest int64 = -1
		lv := map[int]bool{}
		for _, tk := range ts {
			if earliest < 0 || tk.t < earliest {
				earliest = tk.t
			}
			lv[tk.prio] = true
		}
		for l := range lv {
			if l != 0 {
				levels = append(levels, strconv.Itoa(l))
			}
		}
		if len(levels) > 0 {
			prioWant = append(prioWant, p)
		}
		slices.Sort(levels)
		gotLv := slices.Sorted(slices.Values(s.levels[p]))
		if !slices.Equal(levels, gotLv) {
			r.fatalf("%s: levels of %s %v, pending at %v", step, p, gotLv, levels)
		}
		if len(ts) > 0 {
			if s.depth[p] != float64(len(ts)) || s.heads[p] != float64(earliest) {
				r.fatalf("%s: %s has %d pending, earliest %d; depth %v heads %v", step, p, len(ts), earliest, s.depth[p], s.heads[p])
			}
		} else if _, ok := s.depth[p]; ok {
			r.fatalf("%s: empty %s in depth", step, p)
		} else if _, ok := s.heads[p]; ok {
			r.fatalf("%s: empty %s in heads", step, p)
		}
		paused := meta["ps"] != ""
		limit, _ := strconv.Atoi(meta["lim"])
		blocked, _ := strconv.ParseInt(meta["b"], 10, 64)
		held := false
		if partition.Key(p).IsOrdered() {
			held = len(s.held[p]) > 0
		} else if limit > 0 {
			held = len(s.held[p]) >= limit
		}
		_, inReady := s.ready[p]
		schedAt, inSched := s.sched[p]
		where := fmt.Sprintf("%s: partition %s (pending %d, earliest %d, paused %v, limit %d, held %v, blocked %d, now %d): ready %v sched %v@%v",
			step, p, len(ts), earliest, paused, limit, held, blocked, now, inReady, inSched, int64(schedAt))
		if len(ts) == 0 || paused || held {
			if inReady || inSched {
				r.fatalf("%s: should be in neither index", where)
			}
			continue
		}
		e := max(earliest, blocked)
		switch {
		case inReady && inSched:
			r.fatalf("%s: in both", where)
		case inReady:
			if e > now {
				r.fatalf("%s: ready before it can yield work", where)
			}
		case inSched:
			if int64(schedAt) != e {
				r.fatalf("%s: scheduled at the wrong time (want %d)", where, e)
			}
		default:
			r.fatalf("%s: has work but is in no index: it is lost", where)
		}
	}
	slices.Sort(prioWant)
	if got := slices.Sorted(slices.Values(s.prio)); !slices.Equal(got, prioWant) {
		r.fatalf("%s: prio %v, want %v", step, got, prioWant)
	}
	slices.Sort(ctlWant)
	if got := slices.Sorted(slices.Values(s.ctl)); !slices.Equal(got, ctlWant) {
		r.fatalf("%s: ctl %v, want %v", step, got, ctlWant)
	}
}

func cmpOr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// drain lifts every control, lets everything fall due and completes every task.
func (r *invRun) drain() {
	b := r.b
	if err := b.eng.ResumeQueue(b.ctx); err != nil {
		r.fatalf("resume queue: %v", err)
	}
	for _, p := range invParts {
		if err := b.eng.Resume(b.ctx, p); err != nil {
			r.fatalf("resume: %v", err)
		}
		if !p.IsOrdered() {
			if err := b.eng.SetConcurrency(b.ctx, p, 0); err != nil {
				r.fatalf("limit: %v", err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.eng.RecoverAll(b.ctx); err != nil {
			r.fatalf("recover: %v", err)
		}
		ds, err := b.eng.Fetch(b.ctx, "drain", 50, time.Minute)
		if err != nil {
			r.fatalf("fetch: %v", err)
		}
		if len(ds) > 0 {
			b.ack(ds...)
			continue
		}
		st := b.stats()
		if st.Pending == 0 && st.InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.check("drain")
			r.fatalf("drain: stuck with %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.check("drained")
	b.t.Logf("stats %+v", b.stats())
}

// TestInvariantsBigBatches runs every operation on thousands of tasks in one call, past every chunk
// the scripts use (1000 ids, 8000 values for unpack), and checks the queue's keys after each.
func TestInvariantsBigBatches(t *testing.T) {
	t.Parallel()
	b := setupBig(t, Config{RecoverChunk: 2500, DeadLetterMaxCount: 5000})
	// An ordered run and unordered tasks of 9,000 fetched together: below MaxFetch. On the
	// embedded Redis the checks (a call per key) take a minute at that size under -race: 1,650
	// tasks are fetched together there, still past the chunks of 1000 ids.
	n := b.server.Size(t, 6000, 1100)
	r := &invRun{b: b, parts: invParts, snap: map[string]invKey{}}
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{ID: fmt.Sprintf("o%05d", i), Partition: "!big", Priority: []int{0, 2, -1}[i%3]}
	}
	b.publish(msgs...)
	for i := range msgs {
		msgs[i] = Message{ID: fmt.Sprintf("u%05d", i), Partition: partition.Key(fmt.Sprintf("p%d", i)), Delay: time.Duration(i%2) * time.Hour}
	}
	b.publish(msgs...)
	r.check("published")
	ds, err := b.eng.Fetch(b.ctx, "c", min(2*n, MaxFetch), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != n+n/2 {
		t.Fatalf("fetched %d, want %d", len(ds), n+n/2)
	}
	r.check("fetched")
	var ordered []Delivery
	var plain []Receipt
	for _, d := range ds {
		if d.Partition == "!big" {
			ordered = append(ordered, d)
		} else {
			plain = append(plain, d.Receipt())
		}
	}
	// Extend all, then reject the ordered run's first task: the rest comes back.
	rs := make([]Receipt, len(ds))
	for i := range ds {
		rs[i] = ds[i].Receipt()
	}
	errs, _, err := b.eng.Extend(b.ctx, rs, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("extend %s: %v", rs[i].ID, e)
		}
	}
	r.check("extended")
	res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ordered[0].Receipt()}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("reject: %v %v", res, err)
	}
	r.check("rejected")
	// Kill half of the plain ones, ack the rest.
	half := len(plain) / 2
	fs := make([]Failure, half)
	for i := range fs {
		fs[i] = Failure{Receipt: plain[i], Reason: "x"}
	}
	if errs, err := b.eng.Kill(b.ctx, fs); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("kill: %v", err)
	}
	r.check("killed")
	if errs, err := b.eng.Ack(b.ctx, plain[half:]); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("ack: %v", err)
	}
	r.check("acked")
	// Requeue every dead letter in one call.
	dead := r.deadIDs()
	if errs, err := b.eng.Requeue(b.ctx, dead); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("requeue %d: %v", len(dead), err)
	}
	r.check("requeued")
	// Fetch everything again with a short lease and let it expire: recovery in chunks.
	ds, err = b.eng.Fetch(b.ctx, "c", min(2*n, MaxFetch), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r.check("fetched again")
	b.expire(ds[len(ds)-1:])
	time.Sleep(60 * time.Millisecond)
	rec, err := b.eng.RecoverAll(b.ctx)
	if err != nil || rec.Returned != len(ds) {
		t.Fatalf("recover: %+v %v, want %d", rec, err, len(ds))
	}
	r.check("recovered")
	// Drain in big fetches.
	for {
		ds, err := b.eng.Fetch(b.ctx, "c", 5000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		b.ack(ds...)
		r.check("drain")
	}
	st := b.stats()
	if st.Pending != int64(n/2) || st.InFlight != 0 {
		t.Fatalf("left %+v, want only the %d delayed", st, n/2)
	}
	if n, err := b.eng.PurgeAll(b.ctx); err != nil {
		t.Fatalf("purge %d: %v", n, err)
	}
	r.check("end")
}
