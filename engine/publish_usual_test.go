package engine

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// TestPublishUsualMatchesPublish sends one merged call of usual messages through publish_usual.lua
// (the path Publish takes for them) on one queue and through publish.lua's general path on another,
// both seeded alike, and checks that the two leave the same state: codes, records, pending sets in
// order, partition indexes, ready and sched, counters and wake-up tokens. The messages cover runs
// of one partition, duplicates of a stored task and of an earlier message of the call, a paused
// partition, a held ordered partition, a partition waiting in sched and one new to the queue.
func TestPublishUsualMatchesPublish(t *testing.T) {
	t.Parallel()
	calls := [][]Message{
		{{ID: "a", Partition: "p1"}, {ID: "b", Partition: "p1"}, {ID: "c", Partition: "p2"}, {ID: "old", Partition: "p1"},
			{ID: "d", Partition: "p1"}},
		{{ID: "e", Partition: "paused"}, {ID: "f", Partition: "!held"}, {ID: "a", Partition: "p3"},
			{ID: "g", Partition: "waiting"}, {ID: "h", Partition: "p2", Payload: []byte("x")}, {ID: "acked", Partition: "p4"}},
	}
	for _, window := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("window-%v", window), func(t *testing.T) {
			t.Parallel()
			codes := comparePublishUsual(t, window, false, calls)
			want := []int{codeOK, codeOK, codeOK, codeDuplicate, codeOK, codeOK, codeOK, codeDuplicate, codeOK, codeOK, codeOK}
			if window > 0 {
				want[len(want)-1] = codeDuplicate // acked within the window
			}
			if !slices.Equal(codes, want) {
				t.Fatalf("codes %v, want %v", codes, want)
			}
		})
	}
	// Random merged calls over the same partitions, with ids repeated within and across callers.
	parts := []partition.Key{"p1", "p2", "paused", "!held", "waiting", "!o2"}
	for seed := range uint64(20) {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 1))
			calls := make([][]Message, 1+r.IntN(3))
			maxAttempts := []int{0, 25}[seed%2] // a Queue's messages carry its default
			for i := range calls {
				for range 1 + r.IntN(8) {
					calls[i] = append(calls[i], Message{ID: fmt.Sprint("id", r.IntN(12)), Partition: parts[r.IntN(len(parts))],
						MaxAttempts: maxAttempts})
				}
			}
			comparePublishUsual(t, 0, false, calls)
		})
	}
	// Ids made for the call (Publish's own, here fixed so the two queues get the same ones): no id
	// is looked for, and the state must still match, also the dedup window's pruning.
	fresh := [][]Message{
		{{ID: "n1", Partition: "p1"}, {ID: "n2", Partition: "p1"}, {ID: "n3", Partition: "p2"}, {ID: "n4", Partition: "paused"}},
		{{ID: "n5", Partition: "!held"}, {ID: "n6", Partition: "waiting"}, {ID: "n7", Partition: "new"}},
	}
	for _, window := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("new-ids-window-%v", window), func(t *testing.T) {
			t.Parallel()
			codes := comparePublishUsual(t, window, true, fresh)
			if want := slices.Repeat([]int{codeOK}, 7); !slices.Equal(codes, want) {
				t.Fatalf("codes %v, want %v", codes, want)
			}
		})
	}
}

// comparePublishUsual seeds two queues alike (a task in p1 leased, a task delayed an hour in
// waiting, the ordered partition !held held by a leased task, a task acked, the partition paused
// paused), sends calls, one Publish's messages each, as one merged call through publish_usual.lua
// on one and through publish.lua's general path on the other, and fails unless both return the
// same codes and leave the same state (normalState). With newIDs the calls' ops say that Publish
// made their ids. It returns the codes.
func comparePublishUsual(t *testing.T, window time.Duration, newIDs bool, calls [][]Message) []int {
	t.Helper()
	usual, general := setup(t, Config{DedupWindow: window}), setup(t, Config{DedupWindow: window})
	var codes [2][]int
	for i, b := range []*bundle{usual, general} {
		b.publish(Message{ID: "old", Partition: "p1"}, Message{ID: "w", Partition: "waiting", Delay: time.Hour},
			Message{ID: "o", Partition: "!held"}, Message{ID: "acked", Partition: "p5"})
		if err := b.eng.Pause(b.ctx, "paused"); err != nil {
			t.Fatal(err)
		}
		for _, d := range b.fetch("c", 3) { // holds !held; leases old and acked
			if d.ID == "acked" {
				b.ack(d)
			}
		}
		var ops []*op
		for _, msgs := range calls {
			o := b.publishOp(msgs...)
			o.newIDs = newIDs
			ops = append(ops, o)
		}
		if _, ok := usualCall(ops); !ok {
			t.Fatal("the messages are not usual ones")
		}
		if b == usual {
			b.eng.sendPublishes(ops)
			for _, o := range ops {
				if o.err != nil {
					t.Fatal(o.err)
				}
				for _, r := range o.pubs {
					codes[i] = append(codes[i], int(r.code))
				}
			}
			continue
		}
		args := []any{window.Milliseconds(), len(ops)}
		for _, o := range ops {
			args = append(args, o.published())
		}
		for _, o := range ops {
			args = append(args, o.msgs...)
		}
		res, err := b.eng.run(b.ctx, scriptPublish, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.([]any) {
			codes[i] = append(codes[i], int(c.(int64)))
		}
	}
	if !slices.Equal(codes[0], codes[1]) {
		t.Fatalf("codes: publish_usual %v, publish %v", codes[0], codes[1])
	}
	got, ref := usual.normalState(), general.normalState()
	for _, k := range slices.Sorted(maps.Keys(ref)) {
		if got[k] != ref[k] {
			t.Errorf("%s: publish_usual left %q, publish %q", k, got[k], ref[k])
		}
	}
	for k := range got {
		if _, ok := ref[k]; !ok {
			t.Errorf("%s: publish_usual left %q, publish nothing", k, got[k])
		}
	}
	return codes[0]
}

// normalState returns the queue's keys, named without the key base, each with its content less
// what differs between two runs of the same calls (times, sequence numbers, fencing tokens):
// records with only whether s, t and c are set; sorted sets as their members in order, with the
// scores of depth and ready (counts and turns); leases without their values; lists as their
// length; the seq key not at all.
func (b *bundle) normalState() map[string]string {
	b.t.Helper()
	base := b.eng.Keys().Base()
	out := map[string]string{}
	for name, typ := range b.keysInRedis() {
		short := strings.TrimPrefix(name, base)
		var v string
		var err error
		switch typ {
		case "string":
			if short == "seq" {
				continue
			}
			v, err = b.client.Get(b.ctx, name).Result()
		case "hash":
			var h map[string]string
			h, err = b.client.HGetAll(b.ctx, name).Result()
			switch {
			case strings.HasPrefix(short, "t:"):
				for _, f := range []string{"s", "t", "c"} {
					if _, ok := h[f]; ok {
						h[f] = "set" // a time or a sequence number: that it is there
					}
				}
			case short == "leases":
				for f := range h {
					h[f] = ""
				}
			}
			v = fmt.Sprint(h)
		case "zset":
			zs, e := b.client.ZRangeWithScores(b.ctx, name, 0, -1).Result()
			err = e
			var parts []string
			for _, z := range zs {
				m := z.Member.(string)
				if strings.HasPrefix(short, "q:") {
					m = m[20:] // the sequence number's 20 digits, then the id
				}
				if short == "depth" || short == "ready" {
					m = fmt.Sprintf("%s=%v", m, z.Score)
				}
				parts = append(parts, m)
			}
			v = strings.Join(parts, " ")
		case "list":
			var n int64
			n, err = b.client.LLen(b.ctx, name).Result()
			v = fmt.Sprint(n)
		case "set":
			var ms []string
			ms, err = b.client.SMembers(b.ctx, name).Result()
			slices.Sort(ms)
			v = strings.Join(ms, " ")
		default:
			v = typ
		}
		if err != nil {
			b.t.Fatalf("%s: %v", name, err)
		}
		out[short] = v
	}
	return out
}

// TestUsualPublishWithMadeIDsPrunesTheDedupWindow: a usual publish whose ids Publish made checks no
// id, but it still forgets the ids acked before the dedup window, as every publish does.
func TestUsualPublishWithMadeIDsPrunesTheDedupWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{DedupWindow: time.Hour})
	old := float64(b.serverNow().Add(-2 * time.Hour).UnixMilli())
	if err := b.client.ZAdd(b.ctx, b.eng.Keys().Dedup(), redis.Z{Score: old, Member: "acked-long-ago"}).Err(); err != nil {
		t.Fatal(err)
	}
	b.publish(Message{Partition: "p", MaxAttempts: 25})
	if n := b.client.ZCard(b.ctx, b.eng.Keys().Dedup()).Val(); n != 0 {
		t.Fatalf("dedup set holds %d ids after the publish, want the one acked 2 h ago forgotten", n)
	}
}

// TestUsualCall checks which merged calls publish_usual.lua takes: messages whose only option is a
// max attempts all of them share, without headers.
func TestUsualCall(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, c := range []struct {
		name string
		msgs [][]Message
		max  string
		ok   bool
	}{
		{"plain", [][]Message{{{ID: "a"}}, {{ID: "b", Partition: "p", Payload: []byte("x")}}}, "0", true},
		{"max attempts", [][]Message{{{MaxAttempts: 25}, {MaxAttempts: 25}}, {{MaxAttempts: 25}}}, "25", true},
		{"max attempts differ", [][]Message{{{MaxAttempts: 25}}, {{MaxAttempts: 3}}}, "", false},
		{"one without", [][]Message{{{MaxAttempts: 25}, {}}}, "", false},
		{"priority", [][]Message{{{}, {Priority: 1}}}, "", false},
		{"delay", [][]Message{{{Delay: time.Second}}}, "", false},
		{"at", [][]Message{{{At: time.Now()}}}, "", false},
		{"headers", [][]Message{{{Headers: map[string]string{"k": "v"}}}}, "", false},
		{"outcome", [][]Message{{{KeepOutcome: time.Minute}}}, "", false},
		{"hold", [][]Message{{{HoldOnDead: true}}}, "", false},
		{"debounce", [][]Message{{{Debounce: &Debounce{Key: "k", Window: time.Second}}}}, "", false},
	} {
		var ops []*op
		for _, msgs := range c.msgs {
			ops = append(ops, b.publishOp(msgs...))
		}
		if max, ok := usualCall(ops); max != c.max || ok != c.ok {
			t.Errorf("%s: usualCall = %q, %v; want %q, %v", c.name, max, ok, c.max, c.ok)
		}
	}
}

// TestPublishSeqAboveTheClock: a publish's sequence number is above the server clock in ms × 1000
// and above the one before it, also after the counter went back (a restore) more than 100 ms after
// that one was handed out (the counter's promise, common.lua), when the script takes the general
// way to the value and raises the counter.
func TestPublishSeqAboveTheClock(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	var last string
	for i := range 3 {
		if i == 1 {
			if err := b.client.Set(b.ctx, b.eng.Keys().Seq(), "7", 0).Err(); err != nil {
				t.Fatal(err)
			}
			b.waitServerPast(b.serverNow().Add(110 * time.Millisecond))
		}
		floor := fmt.Sprintf("%020d", b.serverNow().UnixMilli()*1000)
		id := b.publish(Message{Partition: "p"})[0]
		short, err := b.client.HGet(b.ctx, b.eng.Keys().Task(id), "s").Result()
		if err != nil {
			t.Fatal(err)
		}
		s := padSequence(short) // the record keeps it without its leading zeros
		if short == "" || short[0] == '0' || len(s) != 20 || s <= floor || s <= last {
			t.Fatalf("publish %d: sequence %q, want one above the clock floor %s and %q", i, short, floor, last)
		}
		counter, err := b.client.Get(b.ctx, b.eng.Keys().Seq()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%020s", counter) < s {
			t.Fatalf("publish %d: counter %s below the sequence number %s it handed out", i, counter, s)
		}
		last = s
	}
}

// TestUsualPublishCommands checks the commands publish_usual.lua sends, as data-model.md lists
// them: a single task to a partition in ready is 8 (TIME, INCRBY, HSET, ZADD, HINCRBY, ZRANK,
// ZINCRBY, LPUSH) and one EXISTS more when the caller gave the task its id; a batch to one
// partition is one HSET a task (and an EXISTS for each id the caller gave) and the rest once.
func TestUsualPublishCommands(t *testing.T) {
	t.Parallel()
	b := costBundle(t, "counts the commands a script sends with INFO commandstats")
	b.publish(Message{Partition: "p"}) // p is in ready from here on
	for _, c := range []struct {
		tasks int
		ids   bool // the caller gives the ids
		want  map[string]int64
	}{
		{1, false, map[string]int64{"time": 1, "incrby": 1, "hset": 1, "zadd": 1, "hincrby": 1, "zrank": 1,
			"zincrby": 1, "lpush": 1}},
		{1, true, map[string]int64{"time": 1, "exists": 1, "incrby": 1, "hset": 1, "zadd": 1, "hincrby": 1, "zrank": 1,
			"zincrby": 1, "lpush": 1}},
		{100, false, map[string]int64{"time": 1, "incrby": 1, "hset": 100, "zadd": 1, "hincrby": 1, "zrank": 1,
			"zincrby": 1, "lpush": 1}},
		{100, true, map[string]int64{"time": 1, "exists": 100, "incrby": 1, "hset": 100, "zadd": 1, "hincrby": 1, "zrank": 1,
			"zincrby": 1, "lpush": 1}},
	} {
		msgs := make([]Message, c.tasks)
		for i := range msgs {
			msgs[i] = Message{Partition: "p", MaxAttempts: 25}
			if c.ids {
				msgs[i].ID = NewID()
			}
		}
		// No fetcher pops the wake-up tokens: start each case with none, so none trims them.
		if err := b.client.Del(b.ctx, b.eng.Keys().Wake()).Err(); err != nil {
			t.Fatal(err)
		}
		before := readCmdStats(b.ctx, t, b.client)
		b.publish(msgs...)
		got := map[string]int64{}
		for name, st := range readCmdStats(b.ctx, t, b.client).since(before) {
			switch name {
			case cpuStat, "info", "evalsha", "fcall":
			default:
				got[name] = st.calls
			}
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("%d tasks, ids given %v: commands %v, want %v", c.tasks, c.ids, got, c.want)
		}
	}
}
