package engine

import (
	"errors"
	"fmt"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/lua"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/srqueue/srq/partition"
)

func TestNewKeysValidation(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("q", MaxNameLen)
	tests := []struct {
		name          string
		prefix, queue string
		base          string // "" when NewKeys must fail
	}{
		{"default", "srq", "emails", "srq:{emails}:"},
		{"colon in queue", "srq", "a:b", "srq:{a:b}:"},
		{"colon in prefix", "app:srq", "q", "app:srq:{q}:"},
		{"unicode", "ü", "日本", "ü:{日本}:"},
		{"spaces and star", "p x", "* q", "p x:{* q}:"},
		{"max length", long, long, long + ":{" + long + "}:"},
		{"empty queue", "srq", "", ""},
		{"empty prefix", "", "q", ""},
		{"queue too long", "srq", long + "q", ""},
		{"prefix too long", long + "p", "q", ""},
		{"queue open brace", "srq", "{q", ""},
		{"queue close brace", "srq", "q}", ""},
		{"queue hash tag", "srq", "{q}", ""},
		{"prefix open brace", "s{rq", "q", ""},
		{"prefix close brace", "srq}", "q", ""},
		{"queue invalid utf8", "srq", "q\xff", ""},
		{"prefix invalid utf8", "\xc3", "q", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := NewKeys(tt.prefix, tt.queue)
			if tt.base == "" {
				if err == nil {
					t.Fatalf("NewKeys(%q, %q) = %q, want an error", tt.prefix, tt.queue, k.Base())
				}
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("NewKeys(%q, %q) = %v, does not wrap ErrInvalid", tt.prefix, tt.queue, err)
				}
				if k != (Keys{}) {
					t.Fatalf("NewKeys(%q, %q) failed but returned %q", tt.prefix, tt.queue, k.Base())
				}
				return
			}
			if err != nil {
				t.Fatalf("NewKeys(%q, %q) = %v", tt.prefix, tt.queue, err)
			}
			if k.Base() != tt.base {
				t.Fatalf("Base() = %q, want %q", k.Base(), tt.base)
			}
			if tag := clusterHashTag(k.Ready()); tag != tt.queue {
				t.Fatalf("hash tag of %q is %q, want %q", k.Ready(), tag, tt.queue)
			}
		})
	}
}

// TestKeysNames pins the exact names, which lua/includes/common.lua builds too: changing one is a
// data migration.
func TestKeysNames(t *testing.T) {
	t.Parallel()
	k, err := NewKeys("srq", "q")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ got, want string }{
		{k.Ready(), "srq:{q}:ready"},
		{k.Sched(), "srq:{q}:sched"},
		{k.Inflight(), "srq:{q}:inflight"},
		{k.Dead(), "srq:{q}:dead"},
		{k.Stats(), "srq:{q}:stats"},
		{k.Seq(), "srq:{q}:seq"},
		{k.Wake(), "srq:{q}:wake"},
		{k.Dedup(), "srq:{q}:dedup"},
		{k.Ctl(), "srq:{q}:ctl"},
		{k.Depth(), "srq:{q}:depth"},
		{k.Heads(), "srq:{q}:heads"},
		{k.Consumers(), "srq:{q}:consumers"},
		{k.QueuePause(), "srq:{q}:qpause"},
		{k.PausedPartitions(), "srq:{q}:ppause"},
		{k.Leases(), "srq:{q}:leases"},
		{k.RateLimit("p:x"), "srq:{q}:rl:p:x"},
		{k.Task("base:0"), "srq:{q}:t:base:0"},
		{k.Task(""), "srq:{q}:t:"},
		{k.Meta("!k:1"), "srq:{q}:m:!k:1"},
		{k.Meta(partition.Base), "srq:{q}:m:"},
		{k.Levels("{x}"), "srq:{q}:r:{x}"},
		{k.Pending("a:b", -3), "srq:{q}:q:-3:a:b"},
		{k.Pending(partition.Base, 0), "srq:{q}:q:0:"},
		{k.Pending("x", MinPriority), "srq:{q}:q:-2147483648:x"},
		{k.Held("ü"), "srq:{q}:l:ü"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if got := k.ScriptKeys(); !slices.Equal(got, []string{k.Base(), k.Seq()}) {
		t.Errorf("ScriptKeys() = %q, want the key base and seq", got)
	}
	var want []string
	for _, s := range lua.KeySuffixes {
		want = append(want, k.Base()+s)
	}
	if got := k.fixedKeys(); !slices.Equal(got, want) {
		t.Errorf("the fixed keys are %q, the scripts build %q", got, want)
	}
}

// clusterHashTag returns the part of key Redis Cluster hashes: the bytes between the first '{'
// and the first '}' after it, when that is not empty; otherwise the whole key.
func clusterHashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return key
	}
	return key[open+1 : open+1+n]
}

// Kinds of key for FuzzKeysNoCollision: the five built from a string, then the fixed ones.
const (
	fuzzKindTask = iota
	fuzzKindMeta
	fuzzKindLevels
	fuzzKindPending
	fuzzKindHeld
	fuzzKindReady
	fuzzKindSched
	fuzzKindInflight
	fuzzKindDead
	fuzzKindStats
	fuzzKindSeq
	fuzzKindWake
	fuzzKindDedup
	fuzzKindCtl
	fuzzKindRateLimit
	fuzzKindDepth
	fuzzKindHeads
	fuzzKindConsumers
	fuzzKindQueuePause
	fuzzKindPausedPartitions
	fuzzKindDebounce
	fuzzKindCount
)

// fuzzKeyInput is one fuzzed key after normalisation: fields a kind does not use are zeroed, so
// two inputs are equal exactly when they name the same key.
type fuzzKeyInput struct {
	prefix, queue string
	kind          int
	s             string
	priority      int
}

func (in fuzzKeyInput) String() string {
	return fmt.Sprintf("%q/%q kind %d %q priority %d", in.prefix, in.queue, in.kind, in.s, in.priority)
}

// fuzzKeyNormalize turns raw fuzz arguments into a fuzzKeyInput and its Keys; an invalid queue or
// prefix falls back to a valid one, since NewKeys refuses it anyway.
func fuzzKeyNormalize(t *testing.T, prefix, queue string, kind uint8, s string,
	priority int64) (fuzzKeyInput, Keys) {
	t.Helper()
	k, err := NewKeys(prefix, queue)
	if err != nil {
		prefix, queue = "srq", "queue"
		if k, err = NewKeys(prefix, queue); err != nil {
			t.Fatal(err)
		}
	}
	in := fuzzKeyInput{prefix: prefix, queue: queue, kind: int(kind) % fuzzKindCount}
	switch in.kind {
	case fuzzKindPending:
		in.s, in.priority = s, int(priority)
	case fuzzKindTask, fuzzKindMeta, fuzzKindLevels, fuzzKindHeld, fuzzKindRateLimit, fuzzKindDebounce:
		in.s = s
	}
	return in, k
}

func (in fuzzKeyInput) build(k Keys) string {
	p := partition.Key(in.s)
	switch in.kind {
	case fuzzKindTask:
		return k.Task(in.s)
	case fuzzKindMeta:
		return k.Meta(p)
	case fuzzKindLevels:
		return k.Levels(p)
	case fuzzKindPending:
		return k.Pending(p, in.priority)
	case fuzzKindHeld:
		return k.Held(p)
	case fuzzKindReady:
		return k.Ready()
	case fuzzKindSched:
		return k.Sched()
	case fuzzKindInflight:
		return k.Inflight()
	case fuzzKindDead:
		return k.Dead()
	case fuzzKindStats:
		return k.Stats()
	case fuzzKindSeq:
		return k.Seq()
	case fuzzKindWake:
		return k.Wake()
	case fuzzKindDedup:
		return k.Dedup()
	case fuzzKindCtl:
		return k.Ctl()
	case fuzzKindRateLimit:
		return k.RateLimit(in.s)
	case fuzzKindDepth:
		return k.Depth()
	case fuzzKindHeads:
		return k.Heads()
	case fuzzKindConsumers:
		return k.Consumers()
	case fuzzKindQueuePause:
		return k.QueuePause()
	case fuzzKindPausedPartitions:
		return k.PausedPartitions()
	case fuzzKindDebounce:
		return k.Debounce(in.s)
	}
	panic("unknown kind")
}

// assertKeysDistinct builds the key of every kind for every string of strs (and, for pending sets,
// every priority of prios) in the queue of k, and fails when two different inputs share a name or
// a name does not hash on the queue's tag.
func assertKeysDistinct(t *testing.T, k Keys, prefix, queue string, strs []string, prios []int) {
	t.Helper()
	seen := make(map[string]fuzzKeyInput)
	add := func(in fuzzKeyInput) {
		name := in.build(k)
		if tag := clusterHashTag(name); tag != queue {
			t.Fatalf("%v: %q hashes on %q, want the queue %q", in, name, tag, queue)
		}
		if other, ok := seen[name]; ok && other != in {
			t.Fatalf("%v and %v are both %q", other, in, name)
		}
		seen[name] = in
	}
	for kind := 0; kind < fuzzKindCount; kind++ {
		in := fuzzKeyInput{prefix: prefix, queue: queue, kind: kind}
		switch kind {
		case fuzzKindPending:
			for _, s := range strs {
				for _, p := range prios {
					in.s, in.priority = s, p
					add(in)
				}
			}
		case fuzzKindTask, fuzzKindMeta, fuzzKindLevels, fuzzKindHeld, fuzzKindRateLimit, fuzzKindDebounce:
			for _, s := range strs {
				in.s = s
				add(in)
			}
		default:
			add(in)
		}
	}
}

// TestKeysNoCollisionSmallAlphabet checks every string of up to three characters drawn from the
// characters the key names are made of, so any ambiguity in how names are joined shows up.
func TestKeysNoCollisionSmallAlphabet(t *testing.T) {
	t.Parallel()
	k, err := NewKeys("srq", "q")
	if err != nil {
		t.Fatal(err)
	}
	alphabet := []string{":", "-", "0", "1", "q", "t", "l", "{", "}"}
	strs := []string{""}
	for n, last := 0, []string{""}; n < 3; n++ {
		var next []string
		for _, s := range last {
			for _, c := range alphabet {
				next = append(next, s+c)
			}
		}
		strs, last = append(strs, next...), next
	}
	prios := []int{MinPriority, -11, -10, -1, 0, 1, 10, 11, 101, MaxPriority}
	assertKeysDistinct(t, k, "srq", "q", strs, prios)
}

// keysNeighbours returns each of strs with its prefixes and suffixes (up to 32 of each), for
// FuzzKeysNoCollision to compare: the inputs a join without clear boundaries would confuse.
func keysNeighbours(strs ...string) []string {
	var out []string
	for _, s := range strs {
		for i := 0; i <= len(s) && i <= 32; i++ {
			out = append(out, s[:i], s[len(s)-i:])
		}
	}
	return out
}

// keysNeighbourPriorities returns ps and the integers formed by a priority followed by the digits
// that start one of strs, or by those digits alone: a join without a clear boundary would give
// Pending(s, p) and Pending(s without its leading digits, those priorities) the same name.
func keysNeighbourPriorities(ps []int, strs ...string) []int {
	out := append([]int{0, -1, 1}, ps...)
	for _, s := range strs {
		digits := s[:len(s)-len(strings.TrimLeft(s, "-0123456789"))]
		for i := 1; i <= len(digits) && i <= 18; i++ {
			if n, err := strconv.Atoi(digits[:i]); err == nil {
				out = append(out, n)
			}
			for _, p := range ps {
				if n, err := strconv.Atoi(strconv.Itoa(p) + digits[:i]); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// FuzzKeysNoCollision checks that two different keys (kind, id or partition, priority) never get
// the same Redis name, in one queue or across two, nor do any keys near them (every kind over the
// prefixes and suffixes of the two strings), whatever the strings hold: any bytes, since the
// builders must not rely on validation. Every name must keep its queue's hash tag as the first
// '{'…'}' pair, so all of a queue's keys share one Cluster slot.
func FuzzKeysNoCollision(f *testing.F) {
	type seed struct {
		k1 uint8
		s1 string
		p1 int64
		k2 uint8
		s2 string
		p2 int64
	}
	seeds := []seed{
		{fuzzKindTask, "q:0:x", 0, fuzzKindPending, "x", 0},
		{fuzzKindTask, "base:0", 0, fuzzKindTask, "base:1", 0},
		{fuzzKindPending, "0:x", 1, fuzzKindPending, "x", 10},
		{fuzzKindPending, "1:x", 0, fuzzKindPending, "x", 0},
		{fuzzKindPending, "", -1, fuzzKindPending, "1:", 0},
		{fuzzKindPending, "x", -3, fuzzKindPending, "3:x", 0},
		{fuzzKindMeta, "x", 0, fuzzKindLevels, "x", 0},
		{fuzzKindMeta, "", 0, fuzzKindHeld, "", 0},
		{fuzzKindTask, "ready", 0, fuzzKindReady, "", 0},
		{fuzzKindMeta, "r:x", 0, fuzzKindLevels, "x", 0},
		{fuzzKindTask, "m:x", 0, fuzzKindMeta, "x", 0},
		{fuzzKindTask, "}:t:x", 0, fuzzKindTask, "x", 0},
		{fuzzKindHeld, "!k:1", 0, fuzzKindTask, "l:!k:1", 0},
		{fuzzKindTask, "{x}", 0, fuzzKindMeta, "{x}", 0},
		{fuzzKindLevels, "}", 0, fuzzKindHeld, "{", 0},
		{fuzzKindTask, "*", 0, fuzzKindHeld, "*", 0},
		{fuzzKindTask, "ü", 0, fuzzKindTask, "\xc3", 0},
		{fuzzKindPending, "x", MaxPriority, fuzzKindPending, "x", MinPriority},
		{fuzzKindDedup, "", 0, fuzzKindWake, "", 0},
		{fuzzKindSeq, "x", 0, fuzzKindSeq, "y", 0},
	}
	for _, s := range seeds {
		f.Add("srq", "queue", s.k1, s.s1, s.p1, "srq", "queue", s.k2, s.s2, s.p2)
	}
	// Across queues: names that a naive scheme would confuse.
	f.Add("srq", "a", uint8(fuzzKindTask), "x", int64(0), "srq", "a}:t", uint8(fuzzKindTask), "x", int64(0))
	f.Add("srq:{a}", "b", uint8(fuzzKindReady), "", int64(0), "srq", "a", uint8(fuzzKindTask), "b", int64(0))
	f.Add("a:", "b", uint8(fuzzKindReady), "", int64(0), "a", ":b", uint8(fuzzKindReady), "", int64(0))
	f.Add("a", "b:t", uint8(fuzzKindTask), "x", int64(0), "a", "b", uint8(fuzzKindTask), "x", int64(0))
	f.Fuzz(func(t *testing.T, prefix1, queue1 string, k1 uint8, s1 string, p1 int64,
		prefix2, queue2 string, k2 uint8, s2 string, p2 int64) {
		in1, keys1 := fuzzKeyNormalize(t, prefix1, queue1, k1, s1, p1)
		in2, keys2 := fuzzKeyNormalize(t, prefix2, queue2, k2, s2, p2)

		check := func(in fuzzKeyInput, k Keys) string {
			name := in.build(k)
			if !strings.HasPrefix(name, k.Base()) {
				t.Fatalf("%v: %q does not start with the base %q", in, name, k.Base())
			}
			if tag := clusterHashTag(name); tag != in.queue {
				t.Fatalf("%v: %q hashes on %q, want the queue %q", in, name, tag, in.queue)
			}
			if open := strings.IndexByte(name, '{'); open != len(in.prefix)+1 {
				t.Fatalf("%v: the first '{' of %q is at %d, want %d", in, name, open, len(in.prefix)+1)
			}
			if in.kind <= fuzzKindHeld && !strings.HasSuffix(name, in.s) {
				t.Fatalf("%v: %q does not end with its variable part", in, name)
			}
			if name != in.build(k) {
				t.Fatalf("%v: the name is not deterministic", in)
			}
			return name
		}
		n1, n2 := check(in1, keys1), check(in2, keys2)
		if (n1 == n2) != (in1 == in2) {
			t.Fatalf("%v -> %q\n%v -> %q", in1, n1, in2, n2)
		}

		// The same two keys in one queue.
		in2.prefix, in2.queue = in1.prefix, in1.queue
		n2 = check(in2, keys1)
		if (n1 == n2) != (in1 == in2) {
			t.Fatalf("in one queue: %v -> %q\n%v -> %q", in1, n1, in2, n2)
		}

		// And every key near them: all kinds over their strings' prefixes and suffixes.
		strs := keysNeighbours(s1, s2)
		prios := keysNeighbourPriorities([]int{int(p1), int(p2)}, strs...)
		assertKeysDistinct(t, keys1, in1.prefix, in1.queue, strs, prios)
	})
}

// keysFixedTypes are the Redis types of the queue's fixed keys, any of which may exist at any time.
func keysFixedTypes(k Keys) map[string]string {
	return map[string]string{
		k.Ready(): "zset", k.Sched(): "zset", k.Inflight(): "zset", k.Dead(): "zset",
		k.Stats(): "hash", k.Seq(): "string", k.Wake(): "list", k.Dedup(): "zset", k.Ctl(): "set",
		k.Depth(): "zset", k.Heads(): "zset", k.Consumers(): "zset", k.QueuePause(): "string",
		k.PausedPartitions(): "zset", k.Leases(): "hash",
	}
}

// keysInRedis returns every key of b's queue in Redis with its type.
func (b *bundle) keysInRedis() map[string]string {
	b.t.Helper()
	var names []string
	iter := b.client.Scan(b.ctx, 0, redistest.GlobEscape(b.eng.Keys().Base())+"*", 1000).Iterator()
	for iter.Next(b.ctx) {
		names = append(names, iter.Val())
	}
	if err := iter.Err(); err != nil {
		b.t.Fatalf("scan: %v", err)
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		typ, err := b.client.Type(b.ctx, name).Result()
		if err != nil {
			b.t.Fatalf("type %q: %v", name, err)
		}
		out[name] = typ
	}
	return out
}

// assertKeysExactly checks that the queue's keys in Redis, apart from the fixed ones, are exactly want
// (name to Redis type), and that each key of want exists with that type.
func (b *bundle) assertKeysExactly(want map[string]string) {
	b.t.Helper()
	fixed := keysFixedTypes(b.eng.Keys())
	got := b.keysInRedis()
	for name, typ := range got {
		if ft, ok := fixed[name]; ok {
			if typ != ft {
				b.t.Errorf("fixed key %q is a %s, want a %s", name, typ, ft)
			}
			continue
		}
		if wt, ok := want[name]; !ok {
			b.t.Errorf("Redis has %q (%s), which the Go key builders did not name", name, typ)
		} else if typ != wt {
			b.t.Errorf("%q is a %s, want a %s", name, typ, wt)
		}
	}
	for name, typ := range want {
		if _, ok := got[name]; ok {
			continue
		}
		n, err := b.client.Exists(b.ctx, name).Result()
		if err != nil {
			b.t.Fatal(err)
		}
		b.t.Errorf("Go names %q (%s) but Redis has no such key (EXISTS = %d)", name, typ, n)
	}
	if b.t.Failed() {
		b.t.FailNow()
	}
}

// TestKeysMatchLua runs the scripts on ids and partitions that hold ':', braces, '*' and non-ASCII
// runes, and checks at every step that the keys Redis holds are exactly the ones Go's Keys names.
func TestKeysMatchLua(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()

	type task struct {
		id       string
		p        partition.Key
		priority int
	}
	tasks := []task{
		{"base:0", partition.Base, 0},
		{"q:0:x", "x", 0},      // the id spells the pending key of partition x
		{"t:x", "x", -3},       // the id spells a task key
		{"x", "0:x", 0},        // partition 0:x at level 0 vs partition x at level 0
		{"r:x", "q:0", 7},      // the partition spells part of a pending key
		{"a:b", "a:b", -3},     // an id that is also a partition
		{"{x}", "{x}", 7},      // a hash tag inside the variable part
		{"}", "}{", 0},         // unbalanced braces
		{"*", "*", 0},          // a glob character
		{"ü", "ü", 7},          // non-ASCII
		{"ready", "ready", 0},  // the names of fixed keys
		{"stats", "stats", -3}, //
		{"o1", "!k:1", 0},      // an ordered partition
		{"o2", "!k:1", 7},      //
		{"l:!k:1", "l", 0},     // the id spells the held set of !k:1
		{"m:*", "m", MinPriority},
		{"seq", "m:*", MaxPriority},
	}
	msgs := make([]Message, len(tasks))
	for i, tk := range tasks {
		msgs[i] = Message{ID: tk.id, Partition: tk.p, Priority: tk.priority, Payload: []byte("payload of " + tk.id)}
	}
	b.publish(msgs...)

	// checkRecords reads every task still expected back and checks nothing was mixed up.
	checkRecords := func(ids map[string]bool) {
		t.Helper()
		for _, tk := range tasks {
			info, err := b.eng.Task(b.ctx, tk.id)
			if !ids[tk.id] {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("Task(%q) = %+v, %v; want ErrNotFound", tk.id, info, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Task(%q): %v", tk.id, err)
			}
			if info.Partition != tk.p || info.Priority != tk.priority || string(info.Payload) != "payload of "+tk.id {
				t.Errorf("Task(%q) = partition %q priority %d payload %q; want %q %d %q", tk.id, info.Partition,
					info.Priority, info.Payload, tk.p, tk.priority, "payload of "+tk.id)
			}
		}
	}

	// Everything pending: records, one pending set per partition and level, and for partitions with
	// tasks at a non-zero level a levels set naming those levels, and the prio set.
	want := map[string]string{}
	levels := map[partition.Key][]string{}
	all := map[string]bool{}
	for _, tk := range tasks {
		all[tk.id] = true
		want[k.Task(tk.id)] = "hash"
		want[k.Pending(tk.p, tk.priority)] = "zset"
		if tk.priority == 0 {
			continue
		}
		want[k.Levels(tk.p)] = "zset"
		want[k.Prio()] = "set"
		if lv := strconv.Itoa(tk.priority); !slices.Contains(levels[tk.p], lv) {
			levels[tk.p] = append(levels[tk.p], lv)
		}
	}
	b.assertKeysExactly(want)
	checkRecords(all)
	for p, lvs := range levels {
		got, err := b.client.ZRange(b.ctx, k.Levels(p), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		slices.Sort(lvs)
		if !slices.Equal(got, lvs) {
			t.Errorf("levels of %q = %q, want %q", p, got, lvs)
		}
	}

	// Pause * and limit a:b: both get a meta hash. Fetching everything else leases it; the ordered
	// and the limited partition get a held set.
	if err := b.eng.Pause(b.ctx, "*"); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.SetConcurrency(b.ctx, "a:b", 5); err != nil {
		t.Fatal(err)
	}
	ds := b.fetch("c1", 100)
	if len(ds) != len(tasks)-1 {
		t.Fatalf("fetched %d tasks, want %d", len(ds), len(tasks)-1)
	}
	for _, d := range ds {
		if d.ID == "*" {
			t.Fatalf("fetched %q from a paused partition", d.ID)
		}
		if string(d.Payload) != "payload of "+d.ID {
			t.Errorf("delivery %q has payload %q", d.ID, d.Payload)
		}
	}
	want = map[string]string{
		k.Pending("*", 0): "zset", k.Meta("*"): "hash", k.Meta("a:b"): "hash",
		k.Held("!k:1"): "set", k.Held("a:b"): "set",
	}
	for _, tk := range tasks {
		want[k.Task(tk.id)] = "hash"
	}
	b.assertKeysExactly(want)
	checkRecords(all)
	for p, ids := range map[partition.Key][]string{"!k:1": {"o1", "o2"}, "a:b": {"a:b"}} {
		got, err := b.client.SMembers(b.ctx, k.Held(p)).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, ids) {
			t.Errorf("held set of %q = %q, want %q", p, got, ids)
		}
	}

	// Acking deletes the records and the held sets; the controls stay.
	b.ack(ds...)
	want = map[string]string{
		k.Task("*"): "hash", k.Pending("*", 0): "zset",
		k.Meta("*"): "hash", k.Meta("a:b"): "hash",
	}
	b.assertKeysExactly(want)
	checkRecords(map[string]bool{"*": true})

	// Lifting the controls and draining leaves only fixed keys.
	if err := b.eng.Resume(b.ctx, "*"); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.SetConcurrency(b.ctx, "a:b", 0); err != nil {
		t.Fatal(err)
	}
	if got := b.drain("c1"); !slices.Equal(got, []string{"*"}) {
		t.Fatalf("drained %q, want [*]", got)
	}
	b.assertKeysExactly(map[string]string{})
	checkRecords(nil)
}
