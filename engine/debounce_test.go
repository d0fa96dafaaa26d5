package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// debounced is a debounced message of key in partition p.
func debounced(p partition.Key, key string, window time.Duration, mode DebounceMode, payload string) Message {
	return Message{Partition: p, Payload: []byte(payload), Debounce: &Debounce{Key: key, Window: window, Mode: mode}}
}

// debounceKey reads the Redis key of debounce key: its window's end and its task's id, "" when absent.
func (b *bundle) debounceKey(key string) (until time.Time, id string) {
	b.t.Helper()
	v, err := b.client.Get(b.ctx, b.eng.Keys().Debounce(key)).Result()
	if err != nil {
		return time.Time{}, ""
	}
	ms, id, _ := strings.Cut(v, ",")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		b.t.Fatalf("debounce key %q holds %q", key, v)
	}
	return time.UnixMilli(n), id
}

// TestDebounceTransitions seeds a queue, runs one debounced publish, alone (the single publish's
// path) or in a batch with a plain message to another partition (the batch path), and compares
// the whole resulting state: the result, the partition indexes, the task's record, the key, the
// counters.
func TestDebounceTransitions(t *testing.T) {
	t.Parallel()
	const u, o, z = partition.Key("u"), partition.Key("!o"), partition.Key("z")
	const key = "k,1:x" // a comma and a colon: the key ends the ref, and the key's name
	const long, short = time.Minute, 30 * time.Millisecond
	type want struct {
		result  string // "added", "replaced" or "dropped"
		sameID  bool   // the result's id is the seeded task's
		ready   []string
		sched   []string
		pending map[string][]string // by partition; "new" and "old" stand for the ids
		payload string              // of the result's task
		later   bool                // the result's task is available a window (long) from the publish
		keyTo   string              // "new" or "old": the task the key names after the step
		leased  bool                // the seeded task is leased
		dead    bool                // the seeded task is a dead letter
	}
	var old string // the seeded task's id
	var leased []Delivery
	seedDebounced := func(p partition.Key, w time.Duration, mode DebounceMode, headers map[string]string) func(b *bundle) {
		return func(b *bundle) {
			m := debounced(p, key, w, mode, "first")
			m.Headers = headers
			res, err := b.eng.Publish(b.ctx, []Message{m})
			if err != nil || res[0].Replaced || res[0].Dropped {
				b.t.Fatalf("seed: %+v, %v", res, err)
			}
			old = res[0].ID
			if w == short || mode == Throttle {
				until, _ := b.debounceKey(key)
				b.waitServerPast(until)
			}
		}
	}
	then := func(seeds ...func(b *bundle)) func(b *bundle) {
		return func(b *bundle) {
			for _, s := range seeds {
				s(b)
			}
		}
	}
	fetch := func(b *bundle) {
		if leased = b.fetch("c", 1); len(leased) != 1 || leased[0].ID != old {
			b.t.Fatalf("seed fetch: %v, want %s", leased, old)
		}
	}
	ack := func(b *bundle) { b.ack(leased...) }
	retry := func(b *bundle) { // a reject with a delay: the task is pending again, taken before
		if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: leased[0].Receipt(), Delay: time.Hour, Reason: "x"}}); err != nil {
			b.t.Fatal(err)
		}
	}
	kill := func(b *bundle) {
		if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: leased[0].Receipt(), Reason: "x"}}); err != nil {
			b.t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		seed func(b *bundle)
		msg  Message
		want want
	}{
		{"debounce: no key adds a task a window later", func(*bundle) {},
			debounced(u, key, long, DebounceReplace, "second"),
			want{result: "added", sched: []string{"u"}, pending: map[string][]string{"u": {"new"}}, payload: "second", later: true, keyTo: "new"}},
		{"debounce: a pending task is replaced, its headers too, and moved a window later",
			seedDebounced(u, long, DebounceReplace, map[string]string{"h": "1"}),
			debounced(u, key, long, DebounceReplace, "second"),
			want{result: "replaced", sameID: true, sched: []string{"u"}, pending: map[string][]string{"u": {"old"}}, payload: "second", later: true, keyTo: "old"}},
		{"debounce: a due task is replaced and its partition leaves ready", seedDebounced(u, short, DebounceReplace, nil),
			debounced(u, key, long, DebounceReplace, "second"),
			want{result: "replaced", sameID: true, sched: []string{"u"}, pending: map[string][]string{"u": {"old"}}, payload: "second", later: true, keyTo: "old"}},
		{"debounce: a leased task is not replaced", then(seedDebounced(u, short, DebounceReplace, nil), fetch),
			debounced(u, key, long, DebounceReplace, "second"),
			want{result: "added", sched: []string{"u"}, pending: map[string][]string{"u": {"new"}}, payload: "second", later: true, keyTo: "new", leased: true}},
		{"debounce: the new task of an ordered partition waits behind the leased one", then(seedDebounced(o, short, DebounceReplace, nil), fetch),
			debounced(o, key, long, DebounceReplace, "second"),
			want{result: "added", pending: map[string][]string{"!o": {"new"}}, payload: "second", later: true, keyTo: "new", leased: true}},
		{"debounce: a task back for a retry is not replaced", then(seedDebounced(u, short, DebounceReplace, nil), fetch, retry),
			debounced(u, key, long, DebounceReplace, "second"),
			want{result: "added", sched: []string{"u"}, pending: map[string][]string{"u": {"new", "old"}}, payload: "second", later: true, keyTo: "new"}},
		{"debounce: an acked task's key adds a task", then(seedDebounced(u, short, DebounceReplace, nil), fetch, ack),
			debounced(u, key, long, DebounceReplace, "second"),
			want{result: "added", sched: []string{"u"}, pending: map[string][]string{"u": {"new"}}, payload: "second", later: true, keyTo: "new"}},
		{"debounce: a dead letter's key adds a task", then(seedDebounced(u, short, DebounceReplace, nil), fetch, kill),
			debounced(u, key, long, DebounceReplace, "second"),
			want{result: "added", sched: []string{"u"}, pending: map[string][]string{"u": {"new"}}, payload: "second", later: true, keyTo: "new", dead: true}},
		{"throttle: no key adds a task available now", func(*bundle) {},
			debounced(u, key, long, Throttle, "second"),
			want{result: "added", ready: []string{"u"}, pending: map[string][]string{"u": {"new"}}, payload: "second", keyTo: "new"}},
		{"throttle: within the window, a pending task drops it",
			func(b *bundle) {
				old = b.publish(debounced(u, key, long, Throttle, "first"))[0]
			},
			debounced(u, key, long, Throttle, "second"),
			want{result: "dropped", sameID: true, ready: []string{"u"}, pending: map[string][]string{"u": {"old"}}, payload: "first", keyTo: "old"}},
		{"throttle: within the window, an acked task drops it",
			func(b *bundle) {
				old = b.publish(debounced(u, key, long, Throttle, "first"))[0]
				fetch(b)
				ack(b)
			},
			debounced(u, key, long, Throttle, "second"),
			want{result: "dropped", sameID: true, keyTo: "old"}},
		{"throttle: past the window, a pending task drops it", seedDebounced(u, short, Throttle, nil),
			debounced(u, key, long, Throttle, "second"),
			want{result: "dropped", sameID: true, ready: []string{"u"}, pending: map[string][]string{"u": {"old"}}, payload: "first", keyTo: "old"}},
		{"throttle: past the window, a leased task drops it", then(seedDebounced(u, short, Throttle, nil), fetch),
			debounced(u, key, long, Throttle, "second"),
			want{result: "dropped", sameID: true, keyTo: "old", leased: true}},
		{"throttle: past the window, an acked task's key adds a task", then(seedDebounced(u, short, Throttle, nil), fetch, ack),
			debounced(u, key, long, Throttle, "second"),
			want{result: "added", ready: []string{"u"}, pending: map[string][]string{"u": {"new"}}, payload: "second", keyTo: "new"}},
		{"throttle: past the window, a dead letter's key adds a task", then(seedDebounced(u, short, Throttle, nil), fetch, kill),
			debounced(u, key, long, Throttle, "second"),
			want{result: "added", ready: []string{"u"}, pending: map[string][]string{"u": {"new"}}, payload: "second", keyTo: "new", dead: true}},
	}
	for _, tc := range cases {
		for _, batch := range []bool{false, true} {
			name := tc.name
			if batch {
				name += " (batch)"
			}
			t.Run(name, func(t *testing.T) {
				b := setup(t, Config{})
				old, leased = "", nil
				tc.seed(b)
				before := b.stats()
				msgs := []Message{tc.msg}
				if batch {
					msgs = append(msgs, Message{ID: "plain", Partition: z})
				}
				start := b.serverNow()
				res, err := b.eng.Publish(b.ctx, msgs)
				end := b.serverNow()
				if err != nil {
					t.Fatal(err)
				}
				r := res[0]
				got := "added"
				if r.Replaced {
					got = "replaced"
				} else if r.Dropped {
					got = "dropped"
				}
				if got != tc.want.result || r.Duplicate || (r.ID == old) != tc.want.sameID {
					t.Fatalf("result %+v (seeded %s); want %s, same id %v", r, old, tc.want.result, tc.want.sameID)
				}
				names := map[string]string{"new": r.ID, "old": old}
				if tc.want.sameID {
					names["new"] = "-"
				}
				w := state{Ready: tc.want.ready, Sched: tc.want.sched, Pending: map[string][]string{}, Held: map[string][]string{}, Meta: map[string]map[string]string{}}
				for p, ids := range tc.want.pending {
					for _, id := range ids {
						w.Pending[p] = append(w.Pending[p], names[id])
					}
				}
				if tc.want.leased {
					w.Inflight = []string{old}
					if tc.msg.Partition.IsOrdered() {
						w.Held[string(tc.msg.Partition)] = []string{old}
					}
				}
				if tc.want.dead {
					w.Dead = []string{old}
				}
				if batch {
					w.Pending["z"] = []string{"plain"}
					w.Ready = append(w.Ready, "z")
				}
				if gotState := b.readState(); !equalStates(gotState, w) {
					t.Fatalf("state\n got %+v\nwant %+v", gotState.normalized(), w.normalized())
				}
				(&invRun{b: b, snap: map[string]invKey{}}).check(name)

				if tc.want.payload != "" {
					info, err := b.eng.Task(b.ctx, r.ID)
					if err != nil {
						t.Fatal(err)
					}
					if string(info.Payload) != tc.want.payload {
						t.Fatalf("payload %q, want %q", info.Payload, tc.want.payload)
					}
					if tc.want.result == "replaced" && info.Headers != nil {
						t.Fatalf("headers %v: the replacing publish had none", info.Headers)
					}
					if info.Debounce == nil || info.Debounce.Key != key || info.Debounce.Mode != tc.msg.Debounce.Mode {
						t.Fatalf("debounce %+v, want key %q mode %v", info.Debounce, key, tc.msg.Debounce.Mode)
					}
					lo, hi := start.Truncate(time.Millisecond), end
					if tc.want.later {
						lo, hi = lo.Add(long), hi.Add(long)
					}
					if tc.want.result != "dropped" && (info.AvailableAt.Before(lo) || info.AvailableAt.After(hi)) {
						t.Fatalf("available at %v, want in [%v, %v]", info.AvailableAt, lo, hi)
					}
				}
				if _, id := b.debounceKey(key); id != names[tc.want.keyTo] {
					t.Fatalf("key names %q, want %s (%q)", id, tc.want.keyTo, names[tc.want.keyTo])
				}
				if ttl := b.client.PTTL(b.ctx, b.eng.Keys().Debounce(key)).Val(); ttl <= 0 || ttl > long+DebounceKeep {
					t.Fatalf("key's expiry in %v, want in (0, %v]", ttl, long+DebounceKeep)
				}
				after := b.stats()
				replaced, dropped := after.Replaced-before.Replaced, after.Dropped-before.Dropped
				added := after.Published - before.Published
				wantAdded := int64(len(msgs))
				if tc.want.result != "added" {
					wantAdded--
				}
				if replaced != bool2int(got == "replaced") || dropped != bool2int(got == "dropped") || added != wantAdded {
					t.Fatalf("counters: replaced %d, dropped %d, published %d; want a %s and %d published", replaced, dropped, added, got, wantAdded)
				}
			})
		}
	}
}

func bool2int(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestDebounceInOneCall checks that debounced publishes of one key merged into one call behave as
// if sent one after the other: the first adds, the next replace (debounce) or drop (throttle), and
// each caller gets its own result.
func TestDebounceInOneCall(t *testing.T) {
	t.Parallel()
	for _, mode := range []DebounceMode{DebounceReplace, Throttle} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			msg := func(id string) Message {
				m := debounced("u", "k", time.Minute, mode, id)
				m.ID = id // the id Publish would generate
				return m
			}
			ops := []*op{
				b.publishOp(msg("1")),
				b.publishOp(msg("2"), Message{ID: "plain", Partition: "u"}),
				b.publishOp(msg("3")),
			}
			b.eng.sendPublishes(ops)
			for i, o := range ops {
				if o.err != nil || len(o.pubs) == 0 {
					t.Fatalf("op %d: %+v, %v", i, o.pubs, o.err)
				}
			}
			first, _ := ops[0].msgs[0].(string)
			if r := ops[0].pubs[0]; r.code != codeOK || r.replaced || r.dropped {
				t.Fatalf("first: %+v, want added", r)
			}
			for i, o := range ops[1:] {
				r := o.pubs[0]
				if r.id != first || r.replaced != (mode == DebounceReplace) || r.dropped != (mode == Throttle) {
					t.Fatalf("op %d: %+v, want the first's task (%s) %s", i+1, r, first, mode)
				}
			}
			info, err := b.eng.Task(b.ctx, first)
			if err != nil {
				t.Fatal(err)
			}
			want := map[DebounceMode]string{DebounceReplace: "3", Throttle: "1"}[mode]
			if string(info.Payload) != want {
				t.Fatalf("payload %q, want %q", info.Payload, want)
			}
			pending := b.readState().Pending["u"]
			wantPending := []string{"plain", first} // the debounced task waits a window
			if mode == Throttle {
				wantPending = []string{first, "plain"}
			}
			if strings.Join(pending, " ") != strings.Join(wantPending, " ") {
				t.Fatalf("pending %v, want %v", pending, wantPending)
			}
			(&invRun{b: b, snap: map[string]invKey{}}).check(mode.String())
		})
	}
}

// TestDebounceRefusals checks the options a debounced publish refuses, before writing anything.
func TestDebounceRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ok := func() Message { return debounced("u", "k", time.Second, DebounceReplace, "x") }
	cases := []struct {
		change func(m *Message)
		says   string
	}{
		{func(m *Message) { m.Debounce.Key = "" }, "empty debounce key"},
		{func(m *Message) { m.Debounce.Key = strings.Repeat("k", MaxDebounceKeyLen+1) }, "debounce key is 513 bytes"},
		{func(m *Message) { m.Debounce.Key = "\xff" }, "not valid UTF-8"},
		{func(m *Message) { m.Debounce.Window = 0 }, "window 0s is outside"},
		{func(m *Message) { m.Debounce.Window = -time.Second }, "window -1s is outside"},
		{func(m *Message) { m.Debounce.Window = 999 * time.Microsecond }, "window 999µs is outside"},
		{func(m *Message) { m.Debounce.Window = MaxDebounceWindow + time.Millisecond }, "window 168h0m0.001s is outside"},
		{func(m *Message) { m.Debounce.Mode = 7 }, "unknown debounce mode 7"},
		{func(m *Message) { m.ID = "a" }, "takes no ID"},
		{func(m *Message) { m.Delay = time.Second }, "no Delay or At"},
		{func(m *Message) { m.At = time.Now() }, "no Delay or At"},
		{func(m *Message) { m.Wait = true }, "(Wait)"},
		{func(m *Message) { m.parent = b.eng.Keys().Base() + "p"; m.policy = 'f' }, "spawned child cannot be debounced"},
	}
	for _, c := range cases {
		m := ok()
		c.change(&m)
		if _, err := b.eng.Publish(b.ctx, []Message{m}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v; want ErrInvalid saying %q", err, c.says)
		}
	}
	if keys := b.keysInRedis(); len(keys) != 0 {
		t.Fatalf("refused publishes wrote %v", keys)
	}
	m := ok()
	m.Debounce.Window = MaxDebounceWindow
	m.Priority, m.MaxAttempts, m.KeepOutcome, m.HoldOnDead = 3, 2, time.Minute, true
	if res, err := b.eng.Publish(b.ctx, []Message{m}); err != nil || res[0].Replaced || res[0].Dropped {
		t.Fatalf("the longest window with the other options: %+v, %v", res, err)
	}
}

// optsPattern is publish.lua's task_opts pattern, and refPattern how debounce.lua splits a
// debounced message's ref, as Go regular expressions.
var (
	optsPattern = regexp.MustCompile(`^(-?\d+),(\d+),(\d+),(\d+),([^,]*),(1?),([fcidt]?),((?s).*)$`)
	refPattern  = regexp.MustCompile(`^(\d+),((?s).*)$`)
)

// FuzzDebounceOpts checks that a debounced message's options parse back, as publish.lua and
// debounce.lua parse them, into its priority, delay, mode, window and key, whatever the key.
func FuzzDebounceOpts(f *testing.F) {
	f.Add("k", int64(1000), uint8(0), int64(0), 0)
	f.Add("a,b,c", int64(1), uint8(1), int64(-5), 3)
	f.Add(",,1,", int64(604800000), uint8(0), int64(2147483647), 0)
	f.Add("\n,\x00", int64(7), uint8(1), int64(0), 1)
	f.Fuzz(func(t *testing.T, key string, windowMS int64, mode uint8, prio int64, maxAttempts int) {
		m := Message{Priority: int(prio), MaxAttempts: maxAttempts,
			Debounce: &Debounce{Key: key, Window: time.Duration(windowMS) * time.Millisecond, Mode: DebounceMode(mode % 2)}}
		if err := validDebounce(&m); err != nil || m.Priority < MinPriority || m.Priority > MaxPriority || m.MaxAttempts < 0 {
			return
		}
		opts := messageOpts(&m)
		g := optsPattern.FindStringSubmatch(opts)
		if g == nil {
			t.Fatalf("opts %q do not parse", opts)
		}
		wantDelay := "0"
		if m.Debounce.Mode == DebounceReplace {
			wantDelay = strconv.FormatInt(windowMS, 10)
		}
		wantMode := map[DebounceMode]string{DebounceReplace: "d", Throttle: "t"}[m.Debounce.Mode]
		if g[1] != strconv.Itoa(m.Priority) || g[2] != wantDelay || g[3] != "0" || g[4] != strconv.Itoa(maxAttempts) || g[7] != wantMode {
			t.Fatalf("opts %q parse to %q", opts, g[1:])
		}
		r := refPattern.FindStringSubmatch(g[8])
		if r == nil || r[1] != strconv.FormatInt(windowMS, 10) || r[2] != key {
			t.Fatalf("ref %q parses to %q, want window %d key %q", g[8], r, windowMS, key)
		}
	})
}

// TestDebounceReplaceKeepsOptions checks that a replace changes the task's payload, headers and
// time only: its priority, max attempts, outcome retention and hold stay the first publish's.
func TestDebounceReplaceKeepsOptions(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	first := debounced("!o", "k", time.Minute, DebounceReplace, "1")
	first.Priority, first.MaxAttempts, first.KeepOutcome, first.HoldOnDead = 3, 2, time.Hour, true
	id := b.publish(first)[0]
	second := debounced("!o", "k", time.Minute, DebounceReplace, "2")
	second.Headers = map[string]string{"h": "2"}
	res, err := b.eng.Publish(b.ctx, []Message{second})
	if err != nil || !res[0].Replaced || res[0].ID != id {
		t.Fatalf("%+v, %v; want a replace of %s", res, err, id)
	}
	info, err := b.eng.Task(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Priority != 3 || info.MaxAttempts != 2 || string(info.Payload) != "2" || info.Headers["h"] != "2" {
		t.Fatalf("task %+v: want priority 3, max attempts 2, the second payload and headers", info)
	}
	rec, err := b.client.HMGet(b.ctx, b.eng.Keys().Task(id), "o", "j").Result()
	if err != nil || rec[0] != "3600000" || rec[1] != "1" {
		t.Fatalf("outcome and hold fields %v, %v; want the first publish's", rec, err)
	}
	if got := b.readState().Pending["!o"]; len(got) != 1 || got[0] != id {
		t.Fatalf("pending %v, want [%s] at its level", got, id)
	}
}

// TestDebounceInvariants runs random debounced and throttled publishes (alone and in batches,
// several keys over ordered and unordered partitions and priorities, windows of a few ms) among
// plain publishes, fetches, acks, rejects, kills, recoveries and run-nows, and checks after every
// step the queue's invariants (TestInvariantsInServerTime's: the partition indexes, the pending
// sets, the leases, an ordered task's place). SRQ_INVARIANTS_SEED replays a run.
func TestDebounceInvariants(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	if s := os.Getenv("SRQ_INVARIANTS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d", seed)
	b := setup(t, Config{RecoverChunk: 3})
	steps := redistest.Size(t, 200, 60)
	r := &invRun{b: b, parts: invParts, rng: rand.New(rand.NewPCG(seed, 7)), snap: map[string]invKey{}}
	keys := []string{"a", "b", "c", "!o,k"}
	for i := range steps {
		switch k := r.rng.IntN(100); {
		case k < 35:
			n := 1 + r.rng.IntN(3)
			msgs := make([]Message, n)
			for j := range msgs {
				mode := DebounceReplace
				if r.rng.IntN(3) == 0 {
					mode = Throttle
				}
				msgs[j] = Message{Partition: r.parts[r.rng.IntN(len(r.parts))], Priority: invPrios[r.rng.IntN(len(invPrios))],
					Payload: []byte(strconv.Itoa(i)), Debounce: &Debounce{Key: keys[r.rng.IntN(len(keys))],
						Window: time.Duration(1+r.rng.IntN(40)) * time.Millisecond, Mode: mode}}
			}
			res, err := b.eng.Publish(b.ctx, msgs)
			if err != nil {
				r.fatalf("debounced publish: %v", err)
			}
			var s []string
			for j, x := range res {
				s = append(s, fmt.Sprintf("%s@%s/%s:%s/replaced=%v/dropped=%v", x.ID, msgs[j].Partition,
					msgs[j].Debounce.Mode, msgs[j].Debounce.Key, x.Replaced, x.Dropped))
				if !x.Dropped {
					r.snapshot(x.ID) // added, or moved by a replace: its place in its partition's order
				}
			}
			r.logf("debounced publish %v", s)
		case k < 45:
			r.opPublish()
		case k < 65:
			r.opFetch()
		case k < 75:
			r.opAck()
		case k < 82:
			r.opReject()
		case k < 85:
			r.opKill()
		case k < 89:
			r.opRecover()
		case k < 92:
			r.opRunNow()
		default:
			d := time.Duration(r.rng.IntN(30)) * time.Millisecond
			r.logf("sleep %v", d)
			time.Sleep(d) // lets windows and delays pass on the server's clock
		}
		r.check(fmt.Sprintf("step %d", i))
	}
	r.drain()
}

// TestDebounceNeverReplacesATakenTask: docs/lifecycle.md "A task a worker has taken is never
// changed: once the key's task is ... pending again after a retry, a crash or a requeue, the next
// publish adds a new task". Each way back to pending, then a debounced publish of the key: a new
// task, the old one's payload unchanged.
func TestDebounceNeverReplacesATakenTask(t *testing.T) {
	t.Parallel()
	const window = 20 * time.Millisecond
	backs := map[string]func(b *bundle, d Delivery){
		"retry": func(b *bundle, d Delivery) {
			if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: d.Receipt(), Reason: "x"}}); err != nil {
				b.t.Fatal(err)
			}
		},
		"crash": func(b *bundle, d Delivery) {
			b.waitLeasesExpired(d)
			if r, err := b.eng.Recover(b.ctx); err != nil || r.Returned != 1 {
				b.t.Fatalf("recover: %+v, %v", r, err)
			}
		},
		"requeue": func(b *bundle, d Delivery) {
			if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: d.Receipt(), Reason: "x"}}); err != nil {
				b.t.Fatal(err)
			}
			if errs, err := b.eng.Requeue(b.ctx, []string{d.ID}); err != nil || errs[0] != nil {
				b.t.Fatalf("requeue: %v %v", err, errs)
			}
		},
	}
	for name, back := range backs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			first := b.publish(debounced("u", "k", window, DebounceReplace, "first"))[0]
			until, _ := b.debounceKey("k")
			b.waitServerPast(until)
			ds, err := b.eng.Fetch(b.ctx, "c", 1, 50*time.Millisecond)
			if err != nil || len(ds) != 1 || ds[0].ID != first {
				t.Fatalf("fetch: %v, %v", ds, err)
			}
			back(b, ds[0])
			if info, err := b.eng.Task(b.ctx, first); err != nil || info.State != StatePending {
				t.Fatalf("the taken task after the %s: %+v, %v; want it pending", name, info.State, err)
			}
			res, err := b.eng.Publish(b.ctx, []Message{debounced("u", "k", window, DebounceReplace, "second")})
			if err != nil || res[0].Replaced || res[0].ID == first {
				t.Fatalf("publish after the %s: %+v, %v; want a new task", name, res, err)
			}
			if info, err := b.eng.Task(b.ctx, first); err != nil || string(info.Payload) != "first" {
				t.Fatalf("the taken task's payload: %q, %v; want it unchanged", info.Payload, err)
			}
		})
	}
}
