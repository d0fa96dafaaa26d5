package engine

import (
	"errors"
	"github.com/srqueue/srq/internal/redistest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/partition"
)

// state is everything the scripts keep about a queue, read back for comparison. Pending lists each
// partition's tasks in the order the partition serves them (priority desc, then time, then publish
// sequence); Held lists leased ids of ordered and limited partitions.
type state struct {
	Ready    []string
	Sched    []string
	Inflight []string
	Dead     []string
	Pending  map[string][]string
	Held     map[string][]string
	Meta     map[string]map[string]string
}

// readState reads the whole state of b's queue. It scans the queue's own keys, which only a test may.
func (b *bundle) readState() state {
	b.t.Helper()
	ctx, c, k := b.ctx, b.client, b.eng.Keys()
	s := state{Pending: map[string][]string{}, Held: map[string][]string{}, Meta: map[string]map[string]string{}}
	s.Ready, _ = c.ZRange(ctx, k.Ready(), 0, -1).Result()
	s.Sched, _ = c.ZRange(ctx, k.Sched(), 0, -1).Result()
	s.Inflight, _ = c.ZRange(ctx, k.Inflight(), 0, -1).Result()
	sort.Strings(s.Inflight)
	s.Dead, _ = c.ZRange(ctx, k.Dead(), 0, -1).Result()
	keys, err := c.Keys(ctx, redistest.GlobEscape(k.Base())+"*").Result()
	if err != nil {
		b.t.Fatal(err)
	}
	sort.Strings(keys)
	// Pending sets are q:<level>:<p>; a partition's are read highest level first.
	levels := map[string][]int{}
	for _, key := range keys {
		rest := strings.TrimPrefix(key, k.Base())
		if l, p, ok := strings.Cut(strings.TrimPrefix(rest, "q:"), ":"); ok && strings.HasPrefix(rest, "q:") {
			n, err := strconv.Atoi(l)
			if err != nil {
				b.t.Fatalf("pending key %q: %v", key, err)
			}
			levels[p] = append(levels[p], n)
		}
	}
	for p, ls := range levels {
		slices.Sort(ls)
		slices.Reverse(ls)
		for _, l := range ls {
			members, _ := c.ZRange(ctx, k.Pending(partition.Key(p), l), 0, -1).Result()
			for _, m := range members {
				s.Pending[p] = append(s.Pending[p], m[20:])
			}
		}
	}
	for _, key := range keys {
		rest := strings.TrimPrefix(key, k.Base())
		switch {
		case strings.HasPrefix(rest, "l:"):
			held, _ := c.SMembers(ctx, key).Result()
			sort.Strings(held)
			s.Held[rest[2:]] = held
		case strings.HasPrefix(rest, "m:"):
			m, _ := c.HGetAll(ctx, key).Result()
			if _, ok := m["b"]; ok {
				m["b"] = "set" // a time; its presence is the state
			}
			s.Meta[rest[2:]] = m
		}
	}
	return s
}

func (s state) normalized() state {
	for _, f := range []*[]string{&s.Ready, &s.Sched, &s.Inflight, &s.Dead} {
		if len(*f) == 0 {
			*f = nil
		}
	}
	return s
}

func equalStates(a, b state) bool {
	a, b = a.normalized(), b.normalized()
	eqMap := func(x, y map[string][]string) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !slices.Equal(v, y[k]) {
				return false
			}
		}
		return true
	}
	if len(a.Meta) != len(b.Meta) {
		return false
	}
	for k, v := range a.Meta {
		w, ok := b.Meta[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for f, x := range v {
			if w[f] != x {
				return false
			}
		}
	}
	return slices.Equal(a.Ready, b.Ready) && slices.Equal(a.Sched, b.Sched) && slices.Equal(a.Inflight, b.Inflight) &&
		slices.Equal(a.Dead, b.Dead) && eqMap(a.Pending, b.Pending) && eqMap(a.Held, b.Held)
}

// TestTransitions seeds a queue, runs one step and compares the whole resulting state.
func TestTransitions(t *testing.T) {
	t.Parallel()
	const o, u = "!o", "u"
	pub := func(b *bundle, p partition.Key, ids ...string) {
		for _, id := range ids {
			b.publish(Message{ID: id, Partition: p})
		}
	}
	var leased []Delivery // set by seeds that fetch; each case runs alone
	fetch := func(b *bundle, n int) { leased = b.fetch("c", n) }
	reject := func(delay time.Duration) func(b *bundle) {
		return func(b *bundle) {
			if _, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: leased[0].Receipt(), Delay: delay}}); err != nil {
				b.t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name string
		seed func(b *bundle)
		step func(b *bundle)
		want state
	}{
		{
			name: "publish to a new partition makes it ready",
			seed: func(b *bundle) {},
			step: func(b *bundle) { pub(b, u, "t1") },
			want: state{Ready: []string{u}, Pending: map[string][]string{u: {"t1"}}},
		},
		{
			name: "publish delayed schedules the partition",
			seed: func(b *bundle) {},
			step: func(b *bundle) { b.publish(Message{ID: "t1", Partition: u, Delay: time.Hour}) },
			want: state{Sched: []string{u}, Pending: map[string][]string{u: {"t1"}}},
		},
		{
			name: "fetch holds an ordered partition",
			seed: func(b *bundle) { pub(b, o, "t1", "t2") },
			step: func(b *bundle) { fetch(b, 1) },
			want: state{Inflight: []string{"t1"}, Pending: map[string][]string{o: {"t2"}}, Held: map[string][]string{o: {"t1"}}},
		},
		{
			name: "fetch keeps an unordered partition ready",
			seed: func(b *bundle) { pub(b, u, "t1", "t2") },
			step: func(b *bundle) { fetch(b, 1) },
			want: state{Ready: []string{u}, Inflight: []string{"t1"}, Pending: map[string][]string{u: {"t2"}}},
		},
		{
			name: "ack of the last leased task releases an ordered partition",
			seed: func(b *bundle) { pub(b, o, "t1", "t2"); fetch(b, 1) },
			step: func(b *bundle) { b.ack(leased...) },
			want: state{Ready: []string{o}, Pending: map[string][]string{o: {"t2"}}},
		},
		{
			name: "ack of the last task leaves nothing",
			seed: func(b *bundle) { pub(b, o, "t1"); fetch(b, 1) },
			step: func(b *bundle) { b.ack(leased...) },
			want: state{},
		},
		{
			name: "reject of an ordered task keeps its position",
			seed: func(b *bundle) { pub(b, o, "t1", "t2"); fetch(b, 1) },
			step: reject(0),
			want: state{Ready: []string{o}, Pending: map[string][]string{o: {"t1", "t2"}}},
		},
		{
			name: "reject inside an ordered run takes back the later tasks, not the earlier",
			seed: func(b *bundle) { pub(b, o, "t1", "t2", "t3"); fetch(b, 3) },
			step: func(b *bundle) {
				res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: leased[1].Receipt()}})
				if err != nil || res[0].Err != nil {
					b.t.Fatal(res, err)
				}
				if errs, _ := b.eng.Ack(b.ctx, []Receipt{leased[2].Receipt()}); !errors.Is(errs[0], ErrStaleToken) {
					b.t.Fatalf("ack of a later task after the reject: %v", errs)
				}
			},
			want: state{Inflight: []string{"t1"}, Pending: map[string][]string{o: {"t2", "t3"}}, Held: map[string][]string{o: {"t1"}}},
		},
		{
			name: "a dead-lettering reject inside an ordered run leaves the later tasks leased",
			seed: func(b *bundle) {
				b.publish(Message{ID: "t1", Partition: o, MaxAttempts: 1}, Message{ID: "t2", Partition: o})
				fetch(b, 2)
			},
			step: reject(0),
			want: state{Inflight: []string{"t2"}, Dead: []string{"t1"}, Held: map[string][]string{o: {"t2"}}},
		},
		{
			name: "reject with delay blocks an ordered partition",
			seed: func(b *bundle) { pub(b, o, "t1", "t2"); fetch(b, 1) },
			step: reject(time.Hour),
			want: state{Sched: []string{o}, Pending: map[string][]string{o: {"t1", "t2"}},
				Meta: map[string]map[string]string{o: {"b": "set"}}},
		},
		{
			name: "reject with delay moves an unordered task behind",
			seed: func(b *bundle) { pub(b, u, "t1", "t2"); fetch(b, 1) },
			step: reject(time.Hour),
			want: state{Ready: []string{u}, Pending: map[string][]string{u: {"t2", "t1"}}},
		},
		{
			name: "kill dead-letters and releases",
			seed: func(b *bundle) { pub(b, o, "t1", "t2"); fetch(b, 1) },
			step: func(b *bundle) {
				if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: leased[0].Receipt()}}); err != nil {
					b.t.Fatal(err)
				}
			},
			want: state{Ready: []string{o}, Dead: []string{"t1"}, Pending: map[string][]string{o: {"t2"}}},
		},
		{
			name: "pause takes a ready partition out",
			seed: func(b *bundle) { pub(b, u, "t1") },
			step: func(b *bundle) { _ = b.eng.Pause(b.ctx, u) },
			want: state{Pending: map[string][]string{u: {"t1"}}, Meta: map[string]map[string]string{u: {"ps": "1"}}},
		},
		{
			name: "resume puts it back",
			seed: func(b *bundle) { pub(b, u, "t1"); _ = b.eng.Pause(b.ctx, u) },
			step: func(b *bundle) { _ = b.eng.Resume(b.ctx, u) },
			want: state{Ready: []string{u}, Pending: map[string][]string{u: {"t1"}}},
		},
		{
			name: "a limited partition at its limit leaves ready",
			seed: func(b *bundle) { _ = b.eng.SetConcurrency(b.ctx, u, 1); pub(b, u, "t1", "t2") },
			step: func(b *bundle) { fetch(b, 5) },
			want: state{Inflight: []string{"t1"}, Pending: map[string][]string{u: {"t2"}}, Held: map[string][]string{u: {"t1"}},
				Meta: map[string]map[string]string{u: {"lim": "1"}}},
		},
		{
			name: "recovery returns an expired ordered run to its position",
			seed: func(b *bundle) {
				pub(b, o, "t1", "t2", "t3")
				ds, err := b.eng.Fetch(b.ctx, "c", 2, shortLease)
				if err != nil {
					b.t.Fatal(err)
				}
				b.expire(ds)
			},
			step: func(b *bundle) {
				if _, err := b.eng.Recover(b.ctx); err != nil {
					b.t.Fatal(err)
				}
			},
			want: state{Ready: []string{o}, Pending: map[string][]string{o: {"t1", "t2", "t3"}}},
		},
		{
			name: "requeue of a dead letter",
			seed: func(b *bundle) {
				pub(b, u, "t1")
				fetch(b, 1)
				_, _ = b.eng.Kill(b.ctx, []Failure{{Receipt: leased[0].Receipt()}})
			},
			step: func(b *bundle) { _, _ = b.eng.Requeue(b.ctx, []string{"t1"}) },
			want: state{Ready: []string{u}, Pending: map[string][]string{u: {"t1"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, Config{})
			tc.seed(b)
			tc.step(b)
			got := b.readState()
			want := tc.want
			if want.Pending == nil {
				want.Pending = map[string][]string{}
			}
			if want.Held == nil {
				want.Held = map[string][]string{}
			}
			if want.Meta == nil {
				want.Meta = map[string]map[string]string{}
			}
			if !equalStates(got, want) {
				t.Fatalf("state after step\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
