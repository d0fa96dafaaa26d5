package engine

// Tests of the promises of docs/data-model.md, section 10 ("Scripts"), that no other test checks:
// each names the promise, quotes the doc's sentence above it, and fails if the script stopped
// keeping it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// scScript runs script s on b's queue with args after the key base and returns its reply as an
// array, as the script sent it.
func (b *bundle) scScript(s *script, args ...any) []any {
	b.t.Helper()
	res, err := b.eng.run(b.ctx, s, args...)
	if err != nil {
		b.t.Fatalf("%s: %v", s.name, err)
	}
	rows, err := replySlice(res)
	if err != nil {
		b.t.Fatalf("%s: %v", s.name, err)
	}
	return rows
}

// scRecord returns the fields of task id's record.
func (b *bundle) scRecord(id string) map[string]string {
	b.t.Helper()
	m, err := b.client.HGetAll(b.ctx, b.eng.Keys().Task(id)).Result()
	if err != nil {
		b.t.Fatal(err)
	}
	return m
}

// scFieldNames returns the sorted names of m.
func scFieldNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// scZScore returns member's score in key, and whether it is there.
func (b *bundle) scZScore(key, member string) (float64, bool) {
	b.t.Helper()
	s, err := b.client.ZScore(b.ctx, key, member).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return s, true
}

// scFetchOne fetches exactly one task for consumer and fails unless it is id.
func (b *bundle) scFetchOne(consumer, id string) Delivery {
	b.t.Helper()
	ds := b.fetch(consumer, 1)
	if len(ds) != 1 || ds[0].ID != id {
		b.t.Fatalf("fetched %v, want %s", idsOf(ds), id)
	}
	return ds[0]
}

// publish_usual.lua: "For a task added `HSET t:<id>` (the fields of the usual task: `d p s c`, and
// `m` unless its attempts are unlimited; no `t`, as it is available when published)."
func TestScriptsContractUsualRecordFields(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "m", Partition: "p", MaxAttempts: 25}, Message{ID: "m2", Partition: "p", MaxAttempts: 25})
	b.publish(Message{ID: "u", Partition: "p"})
	for id, want := range map[string][]string{"m": {"c", "d", "m", "p", "s"}, "u": {"c", "d", "p", "s"}} {
		rec := b.scRecord(id)
		if got := scFieldNames(rec); !slices.Equal(got, want) {
			t.Errorf("record of %s: fields %v, want %v", id, got, want)
		}
		if id == "m" && rec["m"] != "25" {
			t.Errorf("record of m: m = %q, want 25", rec["m"])
		}
	}
}

// publish.lua: "its hash, written with one `HSET` (no `S`: absent means pending; `r` only when the
// priority is not 0; `m` and `h` only when set)", and available-at = `at` if given else now + delay,
// a `t` field only when it is not the publish time.
func TestScriptsContractPublishRecordFields(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	at := time.UnixMilli(1_000_000) // in the past: kept as given
	b.publish(
		Message{ID: "prio", Partition: "p", Priority: 3, Headers: map[string]string{"k": "v"}},
		Message{ID: "late", Partition: "p", Delay: time.Hour, MaxAttempts: 2},
		Message{ID: "at", Partition: "q", At: at},
		Message{ID: "hdr", Partition: "q", Headers: map[string]string{"k": "v"}, KeepOutcome: time.Minute},
	)
	for id, want := range map[string][]string{
		"prio": {"c", "d", "h", "p", "r", "s"},
		"late": {"c", "d", "m", "p", "s", "t"},
		"at":   {"c", "d", "p", "s", "t"},
		"hdr":  {"c", "d", "h", "o", "p", "s"}, // not the usual task's record: written field by field
	} {
		if got := scFieldNames(b.scRecord(id)); !slices.Equal(got, want) {
			t.Errorf("record of %s: fields %v, want %v", id, got, want)
		}
	}
	if r := b.scRecord("prio"); r["r"] != "3" {
		t.Errorf("prio: r = %q, want 3", r["r"])
	}
	late := b.scRecord("late")
	c, _ := strconv.ParseInt(late["c"], 10, 64)
	if tt, _ := strconv.ParseInt(late["t"], 10, 64); tt != c+time.Hour.Milliseconds() {
		t.Errorf("late: t = %d, want c + 1h = %d", tt, c+time.Hour.Milliseconds())
	}
	if got := b.scRecord("at")["t"]; got != "1000000" {
		t.Errorf("at: t = %q, want the At given, 1000000", got)
	}
}

// publish.lua, place_new step 3: "with `s` = its `sched` score ..., `e = min(s, first)`: if `e` ≤
// now it leaves `sched` (if it was there) and joins the tail of `ready`; if `e` > now and differs
// from `s`, it leaves `sched` and is scheduled at `e` with `schedule`; if `e` = `s` nothing changes."
func TestScriptsContractPublishPlacesAScheduledPartition(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	due := func(id string) float64 {
		v, _ := strconv.ParseFloat(b.scRecord(id)["t"], 64)
		return v
	}
	b.publish(Message{ID: "in2h", Partition: "p", Delay: 2 * time.Hour})
	if s, ok := b.scZScore(keys.Sched(), "p"); !ok || s != due("in2h") {
		t.Fatalf("after a task in 2h: sched score %v (%v), want %v", s, ok, due("in2h"))
	}
	b.publish(Message{ID: "in1h", Partition: "p", Delay: time.Hour})
	if s, ok := b.scZScore(keys.Sched(), "p"); !ok || s != due("in1h") {
		t.Fatalf("after a task in 1h: sched score %v (%v), want the earlier %v", s, ok, due("in1h"))
	}
	b.publish(Message{ID: "in3h", Partition: "p", Delay: 3 * time.Hour})
	if s, ok := b.scZScore(keys.Sched(), "p"); !ok || s != due("in1h") {
		t.Fatalf("after a task in 3h: sched score %v (%v), want it unchanged at %v", s, ok, due("in1h"))
	}
	b.publish(Message{ID: "now", Partition: "p"})
	if _, ok := b.scZScore(keys.Sched(), "p"); ok {
		t.Fatal("after a task available now: p is still in sched")
	}
	if _, ok := b.scZScore(keys.Ready(), "p"); !ok {
		t.Fatal("after a task available now: p is not in ready")
	}
}

// fetch.lua: "A task's values are `id, token, partition, priority, attempt, max attempts,
// enqueued-at ms, available-at ms, payload, headers, crashes, last error` ... Its numbers are sent
// as the record holds them, decimal strings (0, an integer, where the record has no such field)";
// the reply starts with "`now ms, lease deadline ms, wait`", `wait` 0 when tasks were leased, and
// the lease deadline is server now + lease ms.
func TestScriptsContractFetchSendsRecordStrings(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a", Partition: "p", MaxAttempts: 3, Payload: []byte("pa")})
	b.publish(Message{ID: "b", Partition: "p"})
	rec := b.scRecord("a")
	out := b.scScript(scriptFetch, "c", 2, 60000, 1)
	if len(out) != 3+2*12 {
		t.Fatalf("reply of %d values, want 3 + 2×12: %v", len(out), out)
	}
	now, deadline := out[0].(int64), out[1].(int64)
	if deadline != now+60000 || out[2] != int64(0) {
		t.Fatalf("reply starts %v, want now, now + 60000, 0", out[:3])
	}
	a, bb := out[3:15], out[15:27]
	want := []any{"a", a[1], "p", "0", "1", "3", rec["c"], rec["c"], "pa", "", int64(0), ""}
	for i := range want {
		if a[i] != want[i] {
			t.Errorf("task a, value %d: %#v, want %#v", i, a[i], want[i])
		}
	}
	if tok, ok := a[1].(string); !ok || len(tok) != 20 {
		t.Errorf("task a's token %#v, want a string of 20 digits", a[1])
	}
	if bb[0] != "b" || bb[5] != int64(0) || bb[10] != int64(0) {
		t.Errorf("task b: id %#v, max attempts %#v, crashes %#v; want b and the integer 0 for the fields its record lacks", bb[0], bb[5], bb[10])
	}
}

// fetch.lua, step 0: "if `qpause` exists, `DEL wake` and return `{now, deadline, -1}` with nothing
// leased (a paused queue ...)", after `seen_consumer` (the consumer's heartbeat).
func TestScriptsContractPausedQueueFetch(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "p"})
	if err := b.eng.PauseQueue(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.client.LPush(b.ctx, keys.Wake(), "1").Err(); err != nil {
		t.Fatal(err)
	}
	out := b.scScript(scriptFetch, "c", 5, 60000, 1)
	if len(out) != 3 || out[1].(int64) != out[0].(int64)+60000 || out[2] != int64(-1) {
		t.Fatalf("fetch of a paused queue: %v, want {now, now + 60000, -1}", out)
	}
	if n := b.client.Exists(b.ctx, keys.Wake()).Val(); n != 0 {
		t.Error("the wake-up list is still there")
	}
	if _, ok := b.scZScore(keys.Consumers(), "c"); !ok {
		t.Error("the consumer's heartbeat was not written")
	}
	if st := b.stats(); st.Pending != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v, want the task still pending", st)
	}
}

// ack_fetch.lua: "the wake-up counts the ack part counted for partitions it made ready
// (`ready_wakes`) are dropped; those for an earlier due time stay, from either part": here the
// fetch part schedules its partition earlier than anything in sched, and takes fewer tasks than
// it wanted.
func TestScriptsContractAckFetchKeepsTheFetchPartsDueTimeWakeUp(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "x", Partition: "q"})
	x := b.scFetchOne("c", "x")
	b.publish(Message{ID: "a", Partition: "p"}, Message{ID: "later", Partition: "p", Delay: time.Hour})
	if err := b.client.Del(b.ctx, b.eng.Keys().Wake()).Err(); err != nil {
		t.Fatal(err)
	}
	errs, ds, _, err := b.eng.AckFetch(b.ctx, []Receipt{x.Receipt()}, "c", 2, time.Minute)
	if err != nil || errs[0] != nil || len(ds) != 1 || ds[0].ID != "a" {
		t.Fatalf("AckFetch: %v %v %v", errs, idsOf(ds), err)
	}
	if n := b.client.LLen(b.ctx, b.eng.Keys().Wake()).Val(); n != 1 {
		t.Fatalf("%d wake-up tokens, want 1 for p's new due time, the earliest in sched", n)
	}
}

// ack.lua: "The token is checked, not the lease deadline: an ack after the deadline but before
// recover has run succeeds."
func TestScriptsContractAckAfterTheDeadlineBeforeRecover(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a", Partition: "p"})
	d := b.scFetchOne("c", "a")
	if err := b.client.ZAddXX(b.ctx, b.eng.Keys().Inflight(), redis.Z{Score: 1, Member: "a"}).Err(); err != nil {
		t.Fatal(err) // the deadline passed long ago
	}
	b.ack(d)
	if st := b.stats(); st.InFlight != 0 || st.Acked != 1 {
		t.Fatalf("stats %+v after the ack", st)
	}
}

// ack.lua: "A valid lease whose record was deleted from outside srq ... is acked too: its lease and
// `inflight` entry go; a tracked one's id then stays in `l:<p>`".
func TestScriptsContractAckOfALeaseWithoutItsRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	p := partition.Ordered("o")
	b.publish(Message{ID: "a", Partition: p}, Message{ID: "b", Partition: p})
	d := b.scFetchOne("c", "a")
	if err := b.client.Del(b.ctx, keys.Task("a")).Err(); err != nil {
		t.Fatal(err)
	}
	b.ack(d)
	if _, ok := b.scZScore(keys.Inflight(), "a"); ok {
		t.Error("the inflight entry stayed")
	}
	if b.client.HExists(b.ctx, keys.Leases(), "a").Val() {
		t.Error("the lease stayed")
	}
	if !b.client.SIsMember(b.ctx, keys.Held(p), "a").Val() {
		t.Error("the id left the held set, which the doc says it stays in")
	}
}

// extend.lua: "The new deadline replaces the old one, so a shorter lease shortens it. A lease whose
// deadline passed but which recover has not taken back yet is extended like any other."
func TestScriptsContractExtendReplacesTheDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "p"})
	ds, err := b.eng.Fetch(b.ctx, "c", 1, time.Hour)
	if err != nil || len(ds) != 1 {
		t.Fatal(idsOf(ds), err)
	}
	before, _ := b.scZScore(keys.Inflight(), "a")
	extend := func() float64 {
		errs, _, err := b.eng.Extend(b.ctx, []Receipt{ds[0].Receipt()}, time.Minute)
		if err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
		s, _ := b.scZScore(keys.Inflight(), "a")
		return s
	}
	if after := extend(); after >= before || after < before-float64(time.Hour.Milliseconds()) {
		t.Fatalf("a lease of an hour extended by a minute: deadline %v, was %v; want it earlier by about 59 minutes", after, before)
	}
	if err := b.client.ZAddXX(b.ctx, keys.Inflight(), redis.Z{Score: 1, Member: "a"}).Err(); err != nil {
		t.Fatal(err)
	}
	if after := extend(); after <= 1 {
		t.Fatalf("an expired lease not yet recovered: deadline %v after the extension", after)
	}
}

// recover.lua: "no record: only the `inflight` entry and the lease are removed"; and
// "Returns `{returned to pending, dead-lettered, more}`".
func TestScriptsContractRecoverOfALeaseWithoutItsRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "p"})
	b.scFetchOne("c", "a")
	if err := b.client.Del(b.ctx, keys.Task("a")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.client.ZAddXX(b.ctx, keys.Inflight(), redis.Z{Score: 1, Member: "a"}).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := b.eng.Recover(b.ctx)
	if err != nil || r != (Recovered{}) {
		t.Fatalf("Recover: %+v, %v; want nothing returned or dead-lettered", r, err)
	}
	if _, ok := b.scZScore(keys.Inflight(), "a"); ok || b.client.HExists(b.ctx, keys.Leases(), "a").Val() {
		t.Fatal("the inflight entry or the lease stayed")
	}
	if n := b.client.Exists(b.ctx, keys.Task("a")).Val(); n != 0 {
		t.Fatal("a record was made")
	}
}

// kill.lua: "Other leases of the partition are not touched."
func TestScriptsContractKillLeavesTheRunsOtherLeases(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	p := partition.Ordered("o")
	b.publish(Message{ID: "a", Partition: p}, Message{ID: "b", Partition: p})
	ds := b.fetch("c", 2)
	if len(ds) != 2 {
		t.Fatalf("fetched %v, want the run a, b", idsOf(ds))
	}
	if errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt(), Reason: "boom"}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	if _, ok := b.scZScore(keys.Inflight(), "b"); !ok || !b.client.SIsMember(b.ctx, keys.Held(p), "b").Val() {
		t.Fatal("killing a took b's lease")
	}
	b.ack(ds[1])
}

// reject.lua: "A later item for it in the same call whose token equals the one remembered in
// `took` is applied once (the `took` entry is cleared, so a further item for it gets `STALE`, as
// does an item with another token)."
func TestScriptsContractRejectOfATakenBackTaskAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	p := partition.Ordered("o")
	b.publish(Message{ID: "a", Partition: p}, Message{ID: "b", Partition: p})
	run := func() []Delivery {
		ds := b.fetch("c", 2)
		if len(ds) != 2 || ds[0].ID != "a" || ds[1].ID != "b" {
			t.Fatalf("fetched %v, want the run a, b", idsOf(ds))
		}
		return ds
	}
	check := func(rs []Rejection, want ...error) {
		t.Helper()
		res, err := b.eng.Reject(b.ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !errors.Is(r.Err, want[i]) {
				t.Errorf("item %d (%s): %v, want %v", i, rs[i].ID, r.Err, want[i])
			}
		}
	}
	ds := run()
	rb := Rejection{Receipt: ds[1].Receipt(), Reason: "b"}
	check([]Rejection{{Receipt: ds[0].Receipt()}, rb, rb}, nil, nil, ErrStaleToken)
	if x := b.scRecord("b")["x"]; x != "b" {
		t.Errorf("b's last error %q, want its item's reason", x)
	}
	ds = run()
	other := ds[1].Receipt()
	other.Token++
	check([]Rejection{{Receipt: ds[0].Receipt()}, {Receipt: other}}, nil, ErrStaleToken)
}

// requeue.lua: "For each dead letter: `ZREM dead`; a new sequence number; `S = p`, `t = now`,
// `a = 0`, `n = 0`; `pend`. `x` (last error), `c`, priority, max attempts, payload and headers are
// kept."
func TestScriptsContractRequeueResetsTheCountersAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(Message{ID: "a", Partition: "p", Priority: 2, MaxAttempts: 1, Payload: []byte("x"),
		Headers: map[string]string{"k": "v"}})
	d := b.scFetchOne("c", "a")
	if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: d.Receipt(), Reason: "boom"}}); err != nil || !res[0].DeadLettered {
		t.Fatalf("reject: %+v %v, want a dead letter", res, err)
	}
	if err := b.client.HSet(b.ctx, b.eng.Keys().Task("a"), "n", 2).Err(); err != nil {
		t.Fatal(err) // two crashes, to see them reset
	}
	dead := b.scRecord("a")
	from := b.serverNow().UnixMilli()
	if errs, err := b.eng.Requeue(b.ctx, []string{"a"}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	to := b.serverNow().UnixMilli()
	rec := b.scRecord("a")
	for f, want := range map[string]string{"S": "p", "a": "0", "n": "0"} {
		if rec[f] != want {
			t.Errorf("%s = %q, want %q", f, rec[f], want)
		}
	}
	for _, f := range []string{"x", "c", "r", "m", "d", "h"} {
		if rec[f] != dead[f] || rec[f] == "" {
			t.Errorf("%s = %q, was %q; want it kept", f, rec[f], dead[f])
		}
	}
	if tt, _ := strconv.ParseInt(rec["t"], 10, 64); tt < from || tt > to {
		t.Errorf("t = %d, want the requeue's time, in [%d, %d]", tt, from, to)
	}
	if padSequence(rec["s"]) <= padSequence(dead["s"]) {
		t.Errorf("sequence %s, was %s; want a new, larger one", rec["s"], dead["s"])
	}
	if _, ok := b.scZScore(b.eng.Keys().Dead(), "a"); ok {
		t.Error("a is still in dead")
	}
}

// scKillAll leases ids, published to partition p in order, and kills them in one call, in order.
func (b *bundle) scKillAll(p partition.Key, ids ...string) {
	b.t.Helper()
	msgs := make([]Message, len(ids))
	for i, id := range ids {
		msgs[i] = Message{ID: id, Partition: p}
	}
	b.publish(msgs...)
	ds := b.fetch("c", len(ids))
	fs := make([]Failure, len(ds))
	for i := range ds {
		fs[i] = Failure{Receipt: ds[i].Receipt(), Reason: "boom " + ds[i].ID}
	}
	slices.SortFunc(fs, func(x, y Failure) int { return slices.Index(ids, x.ID) - slices.Index(ids, y.ID) })
	if errs, err := b.eng.Kill(b.ctx, fs); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		b.t.Fatal(errs, err)
	}
}

// purge.lua: "With ids: each distinct id whose `dead` score exists is deleted ...; an id given
// twice is looked up, deleted and counted once. Without ids: the `limit` oldest (lowest scores).
// `deleted` and the `purged` counter are the number of letters actually deleted."
func TestScriptsContractPurgeCountsWhatItDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.scKillAll("p", "a", "b", "c", "d")
	b.publish(Message{ID: "live", Partition: "q"})
	n, err := b.eng.Purge(b.ctx, []string{"b", "b", "live", "none", "c"})
	if err != nil || n != 2 {
		t.Fatalf("Purge: %d, %v; want 2", n, err)
	}
	if st := b.stats(); st.Purged != 2 || st.Dead != 2 || st.Pending != 1 {
		t.Fatalf("stats %+v, want 2 purged, 2 dead left, the live task pending", st)
	}
	if out := b.scScript(scriptPurge, 1); out[0] != int64(1) || out[1] != int64(1) {
		t.Fatalf("purge of the oldest: %v, want {1, 1}", out)
	}
	if _, ok := b.scZScore(b.eng.Keys().Dead(), "a"); ok {
		t.Fatal("the purge without ids left the oldest letter, a")
	}
	if st := b.stats(); st.Purged != 3 {
		t.Fatalf("purged counter %d, want 3", st.Purged)
	}
}

// dead_list.lua: "Died-at is the `dead` score divided by 1000, rounded down ... Newest first is by
// score, so letters that died in the same millisecond are listed in reverse order of death."
func TestScriptsContractDeadListOrderAndDiedAt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.scKillAll("p", "a", "b", "c") // one call: the same millisecond
	page, err := b.eng.DeadLetters(b.ctx, 0, 10)
	if err != nil || page.Total != 3 {
		t.Fatal(page, err)
	}
	var got []string
	for _, l := range page.Letters {
		got = append(got, l.ID)
		score, _ := b.scZScore(b.eng.Keys().Dead(), l.ID)
		if want := int64(math.Floor(score / 1000)); l.DiedAt.UnixMilli() != want {
			t.Errorf("%s died at %d, want its score %v / 1000 = %d", l.ID, l.DiedAt.UnixMilli(), score, want)
		}
	}
	if want := []string{"c", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("letters %v, want %v", got, want)
	}
}

// dead_scan.lua: "It stops after `limit` matches; the next cursor is the score of the last letter
// looked at", and the next cursor is empty "when the scan reached the oldest letter".
func TestScriptsContractDeadScanCursor(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.scKillAll("p", "a", "b")
	b.scKillAll("q", "c")
	score := func(id string) string {
		s, _ := b.scZScore(b.eng.Keys().Dead(), id)
		return strconv.FormatFloat(s, 'f', -1, 64)
	}
	page, err := b.eng.ScanDead(b.ctx, DeadScan{Limit: 1, Window: 5})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != "c" || page.Next != score("c") {
		t.Fatalf("limit 1: %+v, %v; want c and its score %s as the cursor", page, err, score("c"))
	}
	page, err = b.eng.ScanDead(b.ctx, DeadScan{Limit: 1, Window: 2, ByPartition: true, Partition: "zz"})
	if err != nil || len(page.Letters) != 0 || page.Next != score("b") {
		t.Fatalf("no match in a window of 2: %+v, %v; want b's score %s, the last looked at", page, err, score("b"))
	}
	page, err = b.eng.ScanDead(b.ctx, DeadScan{Limit: 5, Cursor: page.Next})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != "a" || page.Next != "" {
		t.Fatalf("to the end: %+v, %v; want a and an empty cursor", page, err)
	}
}

// set_paused.lua and set_queue_paused.lua: "`ZADD ppause NX now p`" and "Pause: `SET qpause now
// NX`": pausing again keeps the time of the first pause; a resume removes both.
func TestScriptsContractPauseKeepsTheFirstPauseTime(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	if err := b.eng.Pause(b.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseQueue(b.ctx); err != nil {
		t.Fatal(err)
	}
	// As if both had been paused at 1 ms past the epoch.
	if err := b.client.ZAddXX(b.ctx, keys.PausedPartitions(), redis.Z{Score: 1, Member: "p"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Set(b.ctx, keys.QueuePause(), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Pause(b.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseQueue(b.ctx); err != nil {
		t.Fatal(err)
	}
	if s, ok := b.scZScore(keys.PausedPartitions(), "p"); !ok || s != 1 {
		t.Errorf("ppause score %v (%v) after a second pause, want 1", s, ok)
	}
	if v := b.client.Get(b.ctx, keys.QueuePause()).Val(); v != "1" {
		t.Errorf("qpause %q after a second pause, want 1", v)
	}
	if err := b.eng.Resume(b.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.ResumeQueue(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.scZScore(keys.PausedPartitions(), "p"); ok || b.client.Exists(b.ctx, keys.QueuePause()).Val() != 0 {
		t.Error("a resume left ppause's entry or qpause")
	}
}

// set_limit.lua: "Only leases made while a limit is set are tracked in `l:<p>` (and marked `t` in
// `leases`) and counted."
func TestScriptsContractOnlyLeasesUnderALimitAreTracked(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "p"}, Message{ID: "b", Partition: "p"}, Message{ID: "c", Partition: "p"},
		Message{ID: "d", Partition: "p"})
	mark := func(id string) byte {
		v := b.client.HGet(b.ctx, keys.Leases(), id).Val()
		if len(v) < 21 {
			t.Fatalf("lease of %s: %q", id, v)
		}
		return v[20]
	}
	b.scFetchOne("w", "a")
	if err := b.eng.SetConcurrency(b.ctx, "p", 2); err != nil {
		t.Fatal(err)
	}
	b.scFetchOne("w", "b")
	b.scFetchOne("w", "c") // a, leased before the limit, does not count
	if ma, mb := mark("a"), mark("b"); ma != 'u' || mb != 't' {
		t.Errorf("lease marks a %q, b %q; want u and t", ma, mb)
	}
	got := b.client.SMembers(b.ctx, keys.Held("p")).Val()
	slices.Sort(got)
	if !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("held set %v, want [b c]", got)
	}
	if ds := b.fetch("w", 1); len(ds) != 0 {
		t.Errorf("fetched %v past the limit of 2", idsOf(ds))
	}
}

// task.lua: "Returns `NOTFOUND`, or `{lease deadline ms (0: not leased), field, value, …}`: the
// record's fields, then for a leased task `S` = `i`, `k` (token), `w` (consumer) and `a` (the
// current attempt, the record's `a` + 1)".
func TestScriptsContractTaskReply(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "p"}, Message{ID: "b", Partition: "q"})
	if err := b.client.HSet(b.ctx, keys.Task("a"), "a", 2).Err(); err != nil {
		t.Fatal(err) // two deliveries ended
	}
	d := b.scFetchOne("worker-1", "a")
	out := b.scScript(scriptTask, "a")
	deadline, _ := b.scZScore(keys.Inflight(), "a")
	if out[0] != int64(deadline) {
		t.Errorf("lease deadline %v, want %v", out[0], int64(deadline))
	}
	tail := out[len(out)-8:]
	want := []any{"S", "i", "k", d.Token.String(), "w", "worker-1", "a", "3"}
	for i := range want {
		if tail[i] != want[i] {
			t.Errorf("reply ends %v, want %v", tail, want)
			break
		}
	}
	if n := (len(out) - 1 - 8) / 2; n != len(b.scRecord("a")) {
		t.Errorf("%d record fields before the lease's, want the record's %d", n, len(b.scRecord("a")))
	}
	if out := b.scScript(scriptTask, "b"); out[0] != int64(0) || len(out) != 1+2*len(b.scRecord("b")) {
		t.Errorf("pending task: %v, want 0 and its record's fields only", out)
	}
	if res, err := b.eng.run(b.ctx, scriptTask, "none"); err != nil || res != int64(codeNotFound) {
		t.Errorf("no task: %v, %v; want NOTFOUND", res, err)
	}
}

// inflight.lua: "Returns `{ZCARD inflight, {id, deadline ms, partition, priority, attempt, max
// attempts, consumer, enqueued-at ms, crashes}…}`, earliest deadline first ... the attempt is the
// record's `a` + 1."
func TestScriptsContractInflightRows(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "p", MaxAttempts: 5, Priority: 4}, Message{ID: "b", Partition: "q"})
	if err := b.client.HSet(b.ctx, keys.Task("a"), "a", 1, "n", 2).Err(); err != nil {
		t.Fatal(err) // one delivery ended, two leases expired
	}
	if _, err := b.eng.Fetch(b.ctx, "w1", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Fetch(b.ctx, "w2", 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	out := b.scScript(mustScript("inflight"), 0, 10)
	if len(out) != 3 || out[0] != int64(2) {
		t.Fatalf("reply %v, want 2 leases", out)
	}
	rows := []any{out[1], out[2]}
	deadline, _ := b.scZScore(keys.Inflight(), "a")
	c, _ := strconv.ParseInt(b.scRecord("a")["c"], 10, 64)
	want := []any{"a", int64(deadline), "p", "4", int64(2), int64(5), "w1", c, int64(2)}
	if got := rows[0].([]any); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("first row %v, want %v", got, want)
	}
	if got := rows[1].([]any); got[0] != "b" || got[6] != "w2" {
		t.Errorf("second row %v, want b of w2, its deadline later", got)
	}
}

// ratelimit.lua: "every limit is charged: `SET rl:<name> (tat + T) PXAT ceil(tat + T + τ) + 1`, the
// value written with 3 decimals"; when the work is refused the script "charges no limit"; it "uses
// none of the queue's task keys, only `<base>rl:<name>`" and "writes no other key".
func TestScriptsContractRateLimitState(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	keys := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "p"})
	before := b.scQueueKeys()
	now := b.serverNow().UnixMilli()
	// T = 1000/3 ms, τ = T·(2 − 1).
	ls := []Limit{{Name: "x", Rate: Rate{Limit: 3, Per: time.Second, Burst: 2}}, {Name: "y", Rate: Rate{Limit: 1, Per: time.Minute}}}
	if wait, _, err := b.eng.allowAt(b.ctx, now, ls); err != nil || wait != 0 {
		t.Fatal(wait, err)
	}
	T := 1000.0 / 3
	for name, want := range map[string]struct {
		value string
		at    int64
	}{
		"x": {fmt.Sprintf("%.3f", float64(now)+T), int64(math.Ceil(float64(now)+2*T)) + 1},
		"y": {fmt.Sprintf("%d.000", now+60000), now + 60000 + 1},
	} {
		key := keys.RateLimit(name)
		if v := b.client.Get(b.ctx, key).Val(); v != want.value {
			t.Errorf("%s holds %q, want %q", key, v, want.value)
		}
		b.scCheckExpiry(key, want.at)
	}
	after := b.scQueueKeys()
	if added := slices.DeleteFunc(after, func(k string) bool { return slices.Contains(before, k) }); !slices.Equal(added,
		[]string{keys.RateLimit("x"), keys.RateLimit("y")}) {
		t.Errorf("keys added %v, want the two limits' only", added)
	}
	// y allows nothing more for a minute: x must not be charged either.
	if wait, _, err := b.eng.allowAt(b.ctx, now, ls); err != nil || wait != time.Minute {
		t.Fatal(wait, err)
	}
	if v := b.client.Get(b.ctx, keys.RateLimit("x")).Val(); v != fmt.Sprintf("%.3f", float64(now)+T) {
		t.Errorf("a refused ask charged x: %q", v)
	}
}

// scQueueKeys returns the sorted keys of b's queue.
func (b *bundle) scQueueKeys() []string {
	b.t.Helper()
	ks, err := b.client.Keys(b.ctx, globEscape(b.eng.Keys().Base())+"*").Result()
	if err != nil {
		b.t.Fatal(err)
	}
	slices.Sort(ks)
	return ks
}

// scCheckExpiry fails unless key expires at ms (PEXPIRETIME, Redis 7), or, where that command is
// missing, within (0, ms − the server's now].
func (b *bundle) scCheckExpiry(key string, ms int64) {
	b.t.Helper()
	at, err := b.client.Do(b.ctx, "PEXPIRETIME", key).Int64()
	if err == nil {
		// The embedded Redis keeps an expiry as a duration from its clock when it is set and adds
		// its clock when it is read: the time it reads back moves with the time between the two
		// (milliseconds on a loaded machine). A real server's is checked exactly.
		if at != ms && (b.server.Real() || at < ms-50 || at > ms+50) {
			b.t.Errorf("%s expires at %d, want %d", key, at, ms)
		}
		return
	}
	ttl := b.client.PTTL(b.ctx, key).Val()
	if limit := time.Duration(ms-b.serverNow().UnixMilli()) * time.Millisecond; ttl <= 0 || ttl > limit+time.Millisecond {
		b.t.Errorf("%s expires in %v, want in at most %v", key, ttl, limit)
	}
}

// ratelimit.lua: "With no limits, `Allow` returns 0 without running the script."
func TestScriptsContractAllowWithoutLimitsSendsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var sent atomic.Int64
	b.client.AddHook(scCountHook{&sent})
	if wait, err := b.eng.Allow(b.ctx); err != nil || wait != 0 {
		t.Fatal(wait, err)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("Allow with no limits sent %d commands", n)
	}
	if _, err := b.eng.Allow(b.ctx, Limit{Name: "x", Rate: Rate{Limit: 1, Per: time.Second}}); err != nil {
		t.Fatal(err)
	}
	if sent.Load() == 0 {
		t.Fatal("the hook counted nothing for an Allow with a limit")
	}
}

// scCountHook counts the commands a client sends.
type scCountHook struct{ n *atomic.Int64 }

func (h scCountHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scCountHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h scCountHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
