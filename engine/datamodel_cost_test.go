package engine

import (
	"fmt"
	"testing"
	"time"
)

// commandsOf returns how many commands the scripts that f runs send, by INFO commandstats, with
// their breakdown for a failure's message.
func (b *bundle) commandsOf(f func()) (int64, string) {
	b.t.Helper()
	before := readCmdStats(b.ctx, b.t, b.client)
	f()
	d := readCmdStats(b.ctx, b.t, b.client).since(before)
	return d.inner(), d.breakdown(1)
}

// perTask returns the commands one more task costs a call: the count of a call over 3 tasks
// minus that of one over 1, halved. seed makes the tasks for a call, run runs the call over them;
// each call is seeded right before it.
func perTask(b *bundle, what string, seed func(n int) []Delivery, run func(ds []Delivery)) int64 {
	b.t.Helper()
	one := seed(1)
	n1, d1 := b.commandsOf(func() { run(one) })
	three := seed(3)
	n3, d3 := b.commandsOf(func() { run(three) })
	b.t.Logf("%s: 1 task %d commands (%s), 3 tasks %d (%s)", what, n1, d1, n3, d3)
	return (n3 - n1) / 2
}

// TestDataModelStatedCommandCounts: the per-task command counts docs/data-model.md states for
// kill.lua, recover.lua and requeue.lua, and fetch.lua's index writes for one partition served.
func TestDataModelStatedCommandCounts(t *testing.T) {
	t.Parallel()
	b := costBundle(t, "the scripts' commands, from INFO commandstats")
	seq := 0
	leased := func(n int, lease time.Duration) []Delivery {
		var msgs []Message
		for range n {
			seq++
			msgs = append(msgs, Message{Partition: "p", Payload: []byte(fmt.Sprint(seq))})
		}
		b.publish(msgs...)
		ds, err := b.eng.Fetch(b.ctx, "c", n, lease)
		if err != nil || len(ds) != n {
			t.Fatalf("fetch %d: %d, %v", n, len(ds), err)
		}
		return ds
	}
	kill := func(reason string) func([]Delivery) {
		return func(ds []Delivery) {
			fs := make([]Failure, len(ds))
			for i, d := range ds {
				fs[i] = Failure{Receipt: d.Receipt(), Reason: reason}
			}
			if _, err := b.eng.Kill(b.ctx, fs); err != nil {
				t.Fatal(err)
			}
		}
	}
	minute := func(n int) []Delivery { return leased(n, time.Minute) }
	// "per task 13 calls plus the caps (ZCARD dead, ZRANGEBYSCORE dead), 2 more with a reason"
	if got := perTask(b, "kill", minute, kill("")); got != 13+2 {
		t.Errorf("kill: %d commands a task, want 13 plus the caps' 2", got)
	}
	if got := perTask(b, "kill with a reason", minute, kill("boom")); got != 13+2+2 {
		t.Errorf("kill with a reason: %d commands a task, want 13, the caps' 2 and note_error's 2", got)
	}
	// "per id 4 calls (HMGET, ZREM dead, HSET, ZADD q:)"; the dead letters are those killed above.
	page, err := b.eng.DeadLetters(b.ctx, 0, 100)
	dead := page.Letters
	if err != nil || len(dead) != 8 {
		t.Fatalf("dead letters: %d, %v", len(dead), err)
	}
	requeue := func(ids []string) func() {
		return func() {
			if _, err := b.eng.Requeue(b.ctx, ids); err != nil {
				t.Fatal(err)
			}
		}
	}
	requeue([]string{dead[7].ID})() // their partition has pending tasks from here on, as below
	n1, _ := b.commandsOf(requeue([]string{dead[0].ID}))
	n3, d3 := b.commandsOf(requeue([]string{dead[1].ID, dead[2].ID, dead[3].ID}))
	if got := (n3 - n1) / 2; got != 4 {
		t.Errorf("requeue: %d commands an id, want 4 (%s)", got, d3)
	}
	// "about 15 for the task whose delivery expired": unordered tasks, each its own expiry.
	expired := func(n int) []Delivery {
		ds := leased(n, 30*time.Millisecond)
		b.waitLeasesExpired(ds...)
		return ds
	}
	recoverAll := func([]Delivery) {
		if _, err := b.eng.Recover(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := perTask(b, "recover", expired, recoverAll); got != 15 {
		t.Errorf("recover: %d commands a task whose lease expired, want 15", got)
	}
	// fetch.lua's index writes, one partition served that keeps pending tasks: ZINCRBY depth and
	// ZADD heads; none other of the indexes.
	b.publish(Message{Partition: "one"}, Message{Partition: "one"})
	before := readCmdStats(b.ctx, t, b.client)
	b.fetch("c", 1)
	d := readCmdStats(b.ctx, t, b.client).since(before)
	if d["zincrby"].calls != 1 || d["zadd"].calls < 1 || d["zmscore"].calls != 0 {
		t.Errorf("fetch of one partition that keeps pending tasks: %s; want one ZINCRBY depth, a ZADD heads and no ZMSCORE", d.breakdown(1))
	}
	// set_paused.lua: "3 calls to pause, up to 8 to resume (each meta_del an HDEL, an EXISTS and an
	// SREM ctl), TIME, place, and the wake-up": the calls on the controls' keys, by kind.
	b.publish(Message{Partition: "paused"})
	before = readCmdStats(b.ctx, t, b.client)
	if err := b.eng.Pause(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	d = readCmdStats(b.ctx, t, b.client).since(before)
	if d["hset"].calls != 1 || d["sadd"].calls != 1 || d["zadd"].calls < 1 {
		t.Errorf("pause: %s; want HSET m:, SADD ctl, ZADD ppause", d.breakdown(1))
	}
	before = readCmdStats(b.ctx, t, b.client)
	if err := b.eng.Resume(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	d = readCmdStats(b.ctx, t, b.client).since(before)
	// Its own calls: two meta_del (ps, h), each an HDEL, an EXISTS and at most an SREM, and the
	// ZREMs of ppause and halted; place's come besides.
	if d["hdel"].calls != 2 || d["srem"].calls > 2 || d["exists"].calls < 2 || d["zrem"].calls < 2 {
		t.Errorf("resume: %s; want 2 HDEL, 2 EXISTS and up to 2 SREM (meta_del), the ZREMs of ppause and halted", d.breakdown(1))
	}
	// reject: "per named task 5–9 calls (…), then back (4–11)": an unordered task, no reason, its
	// delivery counted (HSET a), back's 4. On a queue of its own, so that a fetch takes only its
	// tasks.
	rq := b.newEngine()
	reject := func(ds []Delivery) {
		rs := make([]Rejection, len(ds))
		for i, d := range ds {
			rs[i] = Rejection{Receipt: d.Receipt()}
		}
		if _, err := rq.Reject(b.ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	// Both measurements reject tasks of a partition that keeps pending tasks (one more than
	// fetched), ready before and after: the same fixed costs.
	keepsPending := func(n int) []Delivery {
		msgs := make([]Message, n+1)
		for i := range msgs {
			msgs[i] = Message{Partition: "rj"}
		}
		if _, err := rq.Publish(b.ctx, msgs); err != nil {
			t.Fatal(err)
		}
		ds, err := rq.Fetch(b.ctx, "c", n, time.Minute)
		if err != nil || len(ds) != n {
			t.Fatalf("fetch %d: %d, %v", n, len(ds), err)
		}
		return ds
	}
	if got := perTask(b, "reject", keepsPending, reject); got != 5+1+4 {
		t.Errorf("reject: %d commands a task, want the item's 5, HSET a and back's 4", got)
	}
}
