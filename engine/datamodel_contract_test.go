package engine

import (
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// Tests of what docs/data-model.md says about the Redis keys of a queue (sections 1 to 9 and 11
// to 14), each named after the promise it checks.

// dmMs is the server's clock in ms.
func (b *bundle) dmMs() int64 {
	b.t.Helper()
	return b.serverNow().UnixMilli()
}

// dmZset returns a sorted set as "member=score" pairs, lowest score first.
func (b *bundle) dmZset(key string) string {
	b.t.Helper()
	zs, err := b.client.ZRangeWithScores(b.ctx, key, 0, -1).Result()
	if err != nil {
		b.t.Fatal(err)
	}
	parts := make([]string, len(zs))
	for i, z := range zs {
		parts[i] = fmt.Sprintf("%v=%s", z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64))
	}
	return strings.Join(parts, " ")
}

// dmInt reads a key that holds a decimal integer, of any size.
func (b *bundle) dmInt(key string) *big.Int {
	b.t.Helper()
	s, err := b.client.Get(b.ctx, key).Result()
	if err != nil {
		b.t.Fatalf("get %s: %v", key, err)
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		b.t.Fatalf("%s holds %q, not a decimal integer", key, s)
	}
	return n
}

// dmExists fails the test unless key exists exactly when want says so.
func (b *bundle) dmExists(key string, want bool) {
	b.t.Helper()
	n, err := b.client.Exists(b.ctx, key).Result()
	if err != nil {
		b.t.Fatal(err)
	}
	if (n == 1) != want {
		b.t.Fatalf("key %s exists: %v, want %v", key, n == 1, want)
	}
}

// §4: "A partition joins at the tail: ready_push ... gives the newcomer that score + 1"; fetch
// "serves each partition one task and then sends it to the tail if it still has work available
// now (a single ZADD with a new highest score ...), to sched, or out." Key 1: scores 1, 2, 3, ….
func TestDataModelReadyIsScoredByTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	b.publish(Message{ID: "a1", Partition: "a"}, Message{ID: "b1", Partition: "b"}, Message{ID: "c1", Partition: "c"},
		Message{ID: "a2", Partition: "a"})
	if got := b.dmZset(k.Ready()); got != "a=1 b=2 c=3" {
		t.Fatalf("ready after the publish: %s, want a=1 b=2 c=3", got)
	}
	if ds := b.fetch("w", 1); len(ds) != 1 || ds[0].ID != "a1" {
		t.Fatalf("first fetch: %+v, want a1", ds)
	}
	if got := b.dmZset(k.Ready()); got != "b=2 c=3 a=4" {
		t.Fatalf("ready after serving a: %s, want b=2 c=3 a=4 (a at the tail)", got)
	}
	if ds := b.fetch("w", 1); len(ds) != 1 || ds[0].ID != "b1" {
		t.Fatalf("second fetch: %+v, want b1", ds)
	}
	if got := b.dmZset(k.Ready()); got != "c=3 a=4" {
		t.Fatalf("ready after serving b, now empty: %s, want c=3 a=4", got)
	}
}

// §1, stats: "pub | publish (+added) ... so a publish writes one counter"; "published | – (written
// by versions of srq that counted publishes here; kept)"; "duplicates | publish".
func TestDataModelPublishWritesOnlyPub(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	b.publish(Message{ID: "x"}, Message{ID: "y"})
	if got := b.client.HGetAll(b.ctx, k.Stats()).Val(); fmt.Sprint(got) != "map[pub:2]" {
		t.Fatalf("stats after a publish of 2: %v, want only pub=2", got)
	}
	if _, err := b.eng.Publish(b.ctx, []Message{{ID: "x"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.client.HGetAll(b.ctx, k.Stats()).Val(); fmt.Sprint(got) != "map[duplicates:1 pub:2]" {
		t.Fatalf("stats after a duplicate: %v, want pub=2 duplicates=1", got)
	}
	if st := b.stats(); st.Published != 2 || st.Pending != 2 || st.Duplicates != 1 {
		t.Fatalf("Stats: published %d pending %d duplicates %d, want 2 2 1", st.Published, st.Pending, st.Duplicates)
	}
}

// §3: "Publish and fetch know the most values they can need (the batch size; n) ... Their first
// next_seq then takes all n values with one INCRBY seq n ...; values they do not use are gaps ...
// (an empty fetch calls next_seq never and reserves nothing)."
func TestDataModelFetchReservesItsSizeEmptyFetchNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	// An hour above the clock floor, so the floor does not move the counter during the test.
	start := big.NewInt((b.dmMs() + 3_600_000) * 1000)
	if err := b.client.Set(b.ctx, k.Seq(), start.String(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	at := func(d int64) *big.Int { return new(big.Int).Add(start, big.NewInt(d)) }
	b.publish(Message{ID: "a"}, Message{ID: "b"})
	if got := b.dmInt(k.Seq()); got.Cmp(at(2)) != 0 {
		t.Fatalf("counter after a publish of 2: %v, want %v", got, at(2))
	}
	ds := b.fetch("w", 10)
	if len(ds) != 2 {
		t.Fatalf("fetched %d, want 2", len(ds))
	}
	if got := b.dmInt(k.Seq()); got.Cmp(at(12)) != 0 {
		t.Fatalf("counter after a fetch of 10 that leased 2: %v, want %v (all 10 taken)", got, at(12))
	}
	tokens := []string{ds[0].Token.String(), ds[1].Token.String()}
	slices.Sort(tokens)
	if want := []string{fmt.Sprintf("%020s", at(3)), fmt.Sprintf("%020s", at(4))}; !slices.Equal(tokens, want) {
		t.Fatalf("tokens %v, want %v: the first values after the counter", tokens, want)
	}
	if ds := b.fetch("w", 10); len(ds) != 0 {
		t.Fatalf("fetched %d from an empty queue", len(ds))
	}
	if got := b.dmInt(k.Seq()); got.Cmp(at(12)) != 0 {
		t.Fatalf("counter after an empty fetch: %v, want %v unchanged", got, at(12))
	}
}

// §3, the clock floor: "When a script finds the counter below that floor, it moves it to the floor
// plus 100,000 (100 ms' worth) before taking its values"; §2: s is the sequence number "without
// the leading zeros".
func TestDataModelCounterJumpsToTheClockFloorPlus100000(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	if err := b.client.Set(b.ctx, k.Seq(), "7", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t0 := b.dmMs()
	b.publish(Message{ID: "a"})
	t1 := b.dmMs()
	got := b.dmInt(k.Seq())
	lo, hi := big.NewInt(t0*1000+100_001), big.NewInt(t1*1000+100_001)
	if got.Cmp(lo) < 0 || got.Cmp(hi) > 0 {
		t.Fatalf("counter %v after a publish on a counter of 7; want the floor + 100,000 + 1, in [%v, %v]", got, lo, hi)
	}
	if s := b.client.HGet(b.ctx, k.Task("a"), "s").Val(); s != got.String() {
		t.Fatalf("the record's sequence number %q, want the counter's value %v", s, got)
	}
}

// §3: "from 2^53 on, the exact value is read back with GET ...; past INCRBY's range (a counter
// above 2^63 − 1 ...) INCRBY fails without writing, and the script falls back to GET and SET.
// Either way the values handed out are the n after the counter's previous value"; "Values are
// returned as ... always 20 digits, zero-padded"; §3: "A pending task's member in its q: set is
// s .. id".
func TestDataModelCounterIsExactPast2To53AndInt64(t *testing.T) {
	t.Parallel()
	for _, seed := range []string{"9007199254740993", "9223372036854775900"} {
		t.Run(seed, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			k := b.eng.Keys()
			if err := b.client.Set(b.ctx, k.Seq(), seed, 0).Err(); err != nil {
				t.Fatal(err)
			}
			start, _ := new(big.Int).SetString(seed, 10)
			at := func(d int64) string { return new(big.Int).Add(start, big.NewInt(d)).String() }
			b.publish(Message{ID: "a", Partition: "p"}, Message{ID: "b", Partition: "p"})
			for i, id := range []string{"a", "b"} {
				if s := b.client.HGet(b.ctx, k.Task(id), "s").Val(); s != at(int64(i+1)) {
					t.Fatalf("sequence number of %s: %s, want %s", id, s, at(int64(i+1)))
				}
			}
			if got, want := b.client.ZRange(b.ctx, k.Pending("p", 0), 0, -1).Val(),
				[]string{fmt.Sprintf("%020s", at(1)) + "a", fmt.Sprintf("%020s", at(2)) + "b"}; !slices.Equal(got, want) {
				t.Fatalf("pending members %q, want %q", got, want)
			}
			if got := b.dmInt(k.Seq()).String(); got != at(2) {
				t.Fatalf("counter after the publish: %s, want %s", got, at(2))
			}
			ds := b.fetch("w", 2)
			if len(ds) != 2 || ds[0].Token.String() != fmt.Sprintf("%020s", at(3)) || ds[1].Token.String() != fmt.Sprintf("%020s", at(4)) {
				t.Fatalf("deliveries %+v, want tokens %s and %s", ds, at(3), at(4))
			}
			if got := b.dmInt(k.Seq()).String(); got != at(4) {
				t.Fatalf("counter after the fetch: %s, want %s", got, at(4))
			}
			b.ack(ds...) // the tokens are exact: an inexact one would be refused
		})
	}
}

// §1, key 7 and §11: finish "LPUSHes min(count, 32) tokens and, when the LPUSH reply (the list's
// length) is over 64, LTRIMs the list to 32"; "A fetch that leases nothing deletes the list".
func TestDataModelWakeListIsTrimmedTo32AndDroppedByAnEmptyFetch(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	wake := b.eng.Keys().Wake()
	llen := func() int64 { return b.client.LLen(b.ctx, wake).Val() }
	tokens := make([]any, 63)
	for i := range tokens {
		tokens[i] = "1"
	}
	if err := b.client.RPush(b.ctx, wake, tokens...).Err(); err != nil {
		t.Fatal(err)
	}
	b.publish(Message{Partition: "p1"})
	if n := llen(); n != 64 {
		t.Fatalf("wake list after a publish on 63 tokens: %d, want 64 (no trim at 64)", n)
	}
	b.publish(Message{Partition: "p2"})
	if n := llen(); n != 32 {
		t.Fatalf("wake list after a publish on 64 tokens: %d, want 32 (trimmed past 64)", n)
	}
	if got := b.client.LRange(b.ctx, wake, 0, 0).Val(); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("a token is %q, want the string 1", got)
	}
	b.client.Del(b.ctx, wake)
	var msgs []Message
	for i := range 40 {
		msgs = append(msgs, Message{Partition: partition.Key(fmt.Sprintf("q%d", i))})
	}
	b.publish(msgs...)
	if n := llen(); n != 32 {
		t.Fatalf("wake list after a publish making 40 partitions ready: %d, want 32", n)
	}
	if ds := b.fetch("w", 100); len(ds) != 42 {
		t.Fatalf("fetched %d, want 42", len(ds))
	}
	if n := llen(); n != 32 {
		t.Fatalf("a fetch that leased tasks changed the wake list to %d", n)
	}
	if ds := b.fetch("w", 1); len(ds) != 0 {
		t.Fatalf("fetched %d from an empty queue", len(ds))
	}
	b.dmExists(wake, false)
}

// §11: "schedule counts one whenever it puts a partition into sched at a time earlier than the
// current head of sched (or into an empty sched)"; "delayed tasks, count nothing there".
func TestDataModelOnlyAnEarlierScheduleWakesOne(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	wake := b.eng.Keys().Wake()
	for _, step := range []struct {
		p     string
		delay time.Duration
		want  int64
	}{
		{"p1", 2 * time.Hour, 1}, // into an empty sched
		{"p2", 3 * time.Hour, 0}, // later than the head
		{"p3", time.Hour, 1},     // earlier than the head
		{"p3", 90 * time.Minute, 0},
		{"p1", 30 * time.Minute, 1}, // a partition in sched moved ahead of the head
	} {
		b.client.Del(b.ctx, wake)
		b.publish(Message{Partition: partition.Key(step.p), Delay: step.delay})
		if n := b.client.LLen(b.ctx, wake).Val(); n != step.want {
			t.Fatalf("publish to %s delayed %v: %d wake-up tokens, want %d", step.p, step.delay, n, step.want)
		}
	}
}

// §1, key 12: "consumer ids that fetched or extended a lease | ms of their last fetch or extension
// | ... entries older than an hour and all but the newest 10,000 are removed whenever a new
// consumer is added; a worker removes its own entry when its Run returns (Engine.Leave ...)".
func TestDataModelConsumersArePrunedWhenANewOneComes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	key := b.eng.Keys().Consumers()
	now := b.dmMs()
	zs := make([]redis.Z, 0, 10_001)
	zs = append(zs, redis.Z{Score: float64(now - 2*3_600_000), Member: "gone"})
	for i := range 10_000 {
		zs = append(zs, redis.Z{Score: float64(now - 60_000 - int64(i)), Member: fmt.Sprintf("c%05d", i)})
	}
	if err := b.client.ZAdd(b.ctx, key, zs...).Err(); err != nil {
		t.Fatal(err)
	}
	t0 := b.dmMs()
	b.fetch("new", 1)
	t1 := b.dmMs()
	if n := b.client.ZCard(b.ctx, key).Val(); n != 10_000 {
		t.Fatalf("%d consumers after a new one came, want 10,000", n)
	}
	if err := b.client.ZScore(b.ctx, key, "gone").Err(); err != redis.Nil {
		t.Fatalf("a consumer unseen for two hours was kept (%v)", err)
	}
	if err := b.client.ZScore(b.ctx, key, "c09999").Err(); err != redis.Nil {
		t.Fatalf("the least recently seen of 10,001 was kept (%v)", err)
	}
	if s := int64(b.client.ZScore(b.ctx, key, "new").Val()); s < t0 || s > t1 {
		t.Fatalf("the new consumer's score %d, want its fetch's time in [%d, %d]", s, t0, t1)
	}
	// A consumer seen before prunes nothing.
	b.client.ZAdd(b.ctx, key, redis.Z{Score: float64(now - 2*3_600_000), Member: "gone"})
	b.fetch("new", 1)
	if err := b.client.ZScore(b.ctx, key, "gone").Err(); err != nil {
		t.Fatalf("a fetch by a known consumer pruned the set (%v)", err)
	}
	if err := b.eng.Leave(b.ctx, "new"); err != nil {
		t.Fatal(err)
	}
	if err := b.client.ZScore(b.ctx, key, "new").Err(); err != redis.Nil {
		t.Fatalf("Leave kept the consumer (%v)", err)
	}
}

// §1, keys 9, 13 and 14 and m:<p>: qpause "ms at which the queue was paused ... while the queue is
// paused"; ppause "paused partitions | ms they were paused"; m:<p> "ps = 1 while paused; lim =
// concurrency limit"; ctl "exactly the partitions whose m:<p> hash exists"; "the key goes with
// its last field, and p leaves ctl with it".
func TestDataModelPauseAndLimitKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	t0 := b.dmMs()
	if err := b.eng.PauseQueue(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Pause(b.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	t1 := b.dmMs()
	if v, err := strconv.ParseInt(b.client.Get(b.ctx, k.QueuePause()).Val(), 10, 64); err != nil || v < t0 || v > t1 {
		t.Fatalf("qpause holds %d (%v), want the ms of the pause in [%d, %d]", v, err, t0, t1)
	}
	if s := int64(b.client.ZScore(b.ctx, k.PausedPartitions(), "p").Val()); s < t0 || s > t1 {
		t.Fatalf("ppause scores p %d, want the ms of the pause in [%d, %d]", s, t0, t1)
	}
	if got := b.client.HGetAll(b.ctx, k.Meta("p")).Val(); fmt.Sprint(got) != "map[ps:1]" {
		t.Fatalf("m:p of a paused partition: %v, want ps=1", got)
	}
	if err := b.eng.SetConcurrency(b.ctx, "lim", 3); err != nil {
		t.Fatal(err)
	}
	if got := b.client.HGetAll(b.ctx, k.Meta("lim")).Val(); fmt.Sprint(got) != "map[lim:3]" {
		t.Fatalf("m:lim of a limited partition: %v, want lim=3", got)
	}
	ctl := b.client.SMembers(b.ctx, k.Ctl()).Val()
	slices.Sort(ctl)
	if !slices.Equal(ctl, []string{"lim", "p"}) {
		t.Fatalf("ctl %q, want the partitions with an m: hash, [lim p]", ctl)
	}
	if err := b.eng.ResumeQueue(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Resume(b.ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.SetConcurrency(b.ctx, "lim", 0); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.QueuePause(), k.PausedPartitions(), k.Meta("p"), k.Meta("lim"), k.Ctl()} {
		b.dmExists(key, false)
	}
}

// §1, key 8: dedup holds "ids of acked tasks | ack time, ms | only when acks run with a dedup
// window > 0".
func TestDataModelDedupOnlyWithAWindow(t *testing.T) {
	t.Parallel()
	for _, window := range []time.Duration{0, time.Hour} {
		t.Run(window.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{DedupWindow: window})
			b.publish(Message{ID: "x"})
			ds := b.fetch("w", 1)
			t0 := b.dmMs()
			b.ack(ds...)
			t1 := b.dmMs()
			key := b.eng.Keys().Dedup()
			if window == 0 {
				b.dmExists(key, false)
				return
			}
			if s := int64(b.client.ZScore(b.ctx, key, "x").Val()); s < t0 || s > t1 {
				t.Fatalf("dedup scores x %d, want the ack's ms in [%d, %d]", s, t0, t1)
			}
		})
	}
}

// §1: r:<p> holds "the non-zero priority levels p has pending tasks in; member = the level
// string. Level 0 is never recorded ... | the level as a number"; prio names "partitions whose r:<p>
// exists"; "a queue in which no pending task has a non-zero priority has no prio key".
func TestDataModelLevelSetHoldsNonZeroLevelsScoredByLevel(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	b.publish(Message{ID: "z", Partition: "flat"})
	b.dmExists(k.Prio(), false)
	b.publish(Message{ID: "a", Partition: "p", Priority: 5}, Message{ID: "b", Partition: "p", Priority: -3},
		Message{ID: "c", Partition: "p"}, Message{ID: "d", Partition: "p", Priority: 5})
	if got := b.dmZset(k.Levels("p")); got != "-3=-3 5=5" {
		t.Fatalf("r:p = %s, want -3=-3 5=5", got)
	}
	if got := b.client.SMembers(b.ctx, k.Prio()).Val(); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("prio = %q, want [p]", got)
	}
	b.dmExists(k.Levels("flat"), false)
	// One turn each: flat's task of 0, and p's first of 5 (its highest level).
	if ds := b.fetch("w", 2); len(ds) != 2 || ds[0].Priority+ds[1].Priority != 5 {
		t.Fatalf("fetched %+v, want one task of 5 (p) and one of 0 (flat)", ds)
	}
	if ds := b.fetch("w", 1); len(ds) != 1 || ds[0].Priority != 5 {
		t.Fatalf("fetched %+v, want p's second task of 5", ds)
	}
	if got := b.dmZset(k.Levels("p")); got != "-3=-3" {
		t.Fatalf("r:p after level 5 emptied: %s, want -3=-3", got)
	}
	b.drain("w")
	b.dmExists(k.Levels("p"), false)
	b.dmExists(k.Prio(), false)
}

// §1, key 4 and §9: dead is scored by "time of death in ms × 1000, made unique: max(now·1000,
// highest score + 1)", "so letters that die in the same millisecond (or while the server clock
// steps back) keep the order in which they died".
func TestDataModelDeadScoresAreUniqueMicroseconds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	b.publish(Message{ID: "a"}, Message{ID: "b"}, Message{ID: "c"}, Message{ID: "d"})
	ds := b.fetch("w", 4)
	byID := map[string]*Delivery{}
	for i := range ds {
		byID[ds[i].ID] = &ds[i]
	}
	t0 := b.dmMs()
	if errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: byID["b"].Receipt()}, {Receipt: byID["a"].Receipt()},
		{Receipt: byID["c"].Receipt()}}); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatal(err, errs)
	}
	t1 := b.dmMs()
	zs := b.client.ZRangeWithScores(b.ctx, k.Dead(), 0, -1).Val()
	if len(zs) != 3 || zs[0].Member != "b" || zs[1].Member != "a" || zs[2].Member != "c" {
		t.Fatalf("dead %v, want b, a, c in the order they died", zs)
	}
	first := int64(zs[0].Score)
	if first < t0*1000 || first > t1*1000 || first%1000 != 0 {
		t.Fatalf("first score %d, want the kill's ms × 1000 in [%d, %d]", first, t0*1000, t1*1000)
	}
	if int64(zs[1].Score) != first+1 || int64(zs[2].Score) != first+2 {
		t.Fatalf("scores %v, want %d, %d, %d", zs, first, first+1, first+2)
	}
	// A highest score ahead of the clock (a clock stepped back): the next letter goes after it.
	ahead := float64((t1 + 3_600_000) * 1000)
	if err := b.client.ZAdd(b.ctx, k.Dead(), redis.Z{Score: ahead, Member: "c"}).Err(); err != nil {
		t.Fatal(err)
	}
	if errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: byID["d"].Receipt()}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if s := b.client.ZScore(b.ctx, k.Dead(), "d").Val(); s != ahead+1 {
		t.Fatalf("score after a letter ahead of the clock: %v, want %v", s, ahead+1)
	}
}

// §8: "No queue key has a TTL and no behaviour waits for one. The only keys with an expiry are
// the rl: keys of ratelimit.lua". The debounce table of §1 gives db: keys an expiry too (PX); this
// checks that every other key a queue's usual calls write has none, and that rl: keys have one.
func TestDataModelQueueKeysHaveNoExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{DedupWindow: time.Hour})
	k := b.eng.Keys()
	b.publish(Message{ID: "u1", Partition: "u"}, Message{ID: "o1", Partition: "!o"}, Message{ID: "o2", Partition: "!o"},
		Message{ID: "pr", Partition: "lv", Priority: 3}, Message{ID: "late", Partition: "u", Priority: 2, Delay: time.Hour},
		Message{ID: "k1", Partition: "k"})
	if _, err := b.eng.Publish(b.ctx, []Message{{Partition: "u", Debounce: &Debounce{Key: "dk", Window: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Pause(b.ctx, "pp"); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.SetConcurrency(b.ctx, "k", 2); err != nil {
		t.Fatal(err)
	}
	ds := b.fetch("w", 10)
	byID := map[string]*Delivery{}
	for i := range ds {
		byID[ds[i].ID] = &ds[i]
	}
	if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: byID["o1"].Receipt(), Delay: time.Hour, Reason: "later"}}); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if errs, err := b.eng.Kill(b.ctx, []Failure{{Receipt: byID["u1"].Receipt(), Reason: "boom"}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	b.ack(*byID["pr"])
	if _, err := b.eng.Allow(b.ctx, Limit{Name: "q", Rate: Rate{Limit: 1, Per: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	keys := b.keysInRedis()
	for _, must := range []string{k.Dead(), k.Dedup(), k.Wake(), k.Consumers(), k.Leases(), k.Meta("!o"), k.Held("k"),
		k.Task("late"), k.Levels("u"), k.Prio(), k.Ctl(), k.Sched(), k.RateLimit("q"), k.Debounce("dk")} {
		if _, ok := keys[must]; !ok {
			t.Fatalf("the workload left no %s", must)
		}
	}
	for name := range keys {
		ttl, err := b.client.PTTL(b.ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		rest := strings.TrimPrefix(name, k.Base())
		expires := strings.HasPrefix(rest, "rl:") || strings.HasPrefix(rest, "db:")
		if expires && ttl <= 0 {
			t.Errorf("%s has no expiry (PTTL %v)", name, ttl)
		}
		if !expires && ttl != -1 {
			t.Errorf("%s expires (PTTL %v)", name, ttl)
		}
	}
}

// §1, the record's fields (section 2) and q:<level>:<p>: a usual task's record is d, p, s and c
// only ("absent means pending", "absent means 0", "absent = unlimited", "only with headers", no t
// when available at c); otherwise r, m, h and t; its pending member is the 20-digit sequence number
// and the id, scored by available-at.
func TestDataModelTaskRecordAndPendingMember(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	t0 := b.dmMs()
	b.publish(Message{ID: "u", Partition: "p", Payload: []byte("x")})
	b.publish(Message{ID: "f", Partition: "p", Payload: []byte("y"), Priority: 3, MaxAttempts: 2,
		Headers: map[string]string{"k": "v"}, Delay: time.Hour})
	t1 := b.dmMs()
	check := func(id string, level int, fields string) map[string]string {
		t.Helper()
		rec := b.client.HGetAll(b.ctx, k.Task(id)).Val()
		names := make([]string, 0, len(rec))
		for f := range rec {
			names = append(names, f)
		}
		slices.Sort(names)
		if got := strings.Join(names, ""); got != fields {
			t.Fatalf("record of %s has fields %q, want %q: %v", id, got, fields, rec)
		}
		c, _ := strconv.ParseInt(rec["c"], 10, 64)
		if c < t0 || c > t1 || rec["p"] != "p" || rec["s"] == "" || rec["s"][0] == '0' {
			t.Fatalf("record of %s: %v; want c in [%d, %d], p, and s without leading zeros", id, rec, t0, t1)
		}
		at := cmpOr(rec["t"], rec["c"])
		member := fmt.Sprintf("%020s", rec["s"]) + id
		score, err := b.client.ZScore(b.ctx, k.Pending("p", level), member).Result()
		if err != nil || strconv.FormatFloat(score, 'f', -1, 64) != at {
			t.Fatalf("pending member %q of %s: score %v (%v), want its available-at %s", member, id, score, err, at)
		}
		return rec
	}
	if rec := check("u", 0, "cdps"); rec["d"] != "x" {
		t.Fatalf("payload %q", rec["d"])
	}
	rec := check("f", 3, "cdhmprst")
	c, _ := strconv.ParseInt(rec["c"], 10, 64)
	if rec["r"] != "3" || rec["m"] != "2" || rec["t"] != strconv.FormatInt(c+3_600_000, 10) {
		t.Fatalf("record of f: %v; want r 3, m 2, t = c + 1h", rec)
	}
}

// §2, t: an ordered task's available-at is "never changed otherwise ... after publish (its reject,
// recovery or hand-back, and those of the tasks taken back with it, write t with the value it had:
// c when it had none)".
func TestDataModelOrderedRejectWritesTheSameAvailableAt(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	ids := b.publish(Message{Partition: "!o"}, Message{Partition: "!o"})
	ds := b.fetch("c", 2)
	if len(ds) != 2 {
		t.Fatalf("fetched %d", len(ds))
	}
	if res, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: ds[0].Receipt(), Delay: time.Minute}}); err != nil || res[0].Err != nil {
		t.Fatalf("reject: %+v, %v", res, err)
	}
	for _, id := range ids { // the rejected task and the one taken back with it
		rec := b.client.HMGet(b.ctx, k.Task(id), "t", "c").Val()
		if rec[0] == nil || rec[0] != rec[1] {
			t.Fatalf("record of %s after the reject: t %v, c %v; want t written, equal to c", id, rec[0], rec[1])
		}
	}
}

// §1, l:<p>: "each id is removed by ack (only for a lease marked tracked in leases ...)"; §6:
// "Tasks leased before the limit was set are not in the set, are not marked tracked, and do not
// count": the ack of such a lease releases nothing, the ack of a tracked one does.
func TestDataModelAckOfAnUntrackedLeaseLeavesTheHold(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	b.publish(Message{ID: "a", Partition: "lim"}, Message{ID: "b", Partition: "lim"}, Message{ID: "c", Partition: "lim"})
	first := b.fetch("w", 1)
	if len(first) != 1 || first[0].ID != "a" {
		t.Fatalf("fetched %+v, want a", first)
	}
	if err := b.eng.SetConcurrency(b.ctx, "lim", 1); err != nil {
		t.Fatal(err)
	}
	second := b.fetch("w", 1)
	if len(second) != 1 || second[0].ID != "b" {
		t.Fatalf("fetched %+v under a limit of 1 with one lease from before it, want b", second)
	}
	leases := b.client.HGetAll(b.ctx, k.Leases()).Val()
	if leases["a"] != first[0].Token.String()+"uw" || leases["b"] != second[0].Token.String()+"tw" {
		t.Fatalf("leases %v: want a untracked (u), b tracked (t)", leases)
	}
	if got := b.client.SMembers(b.ctx, k.Held("lim")).Val(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("l:lim = %q, want [b]", got)
	}
	if ds := b.fetch("w", 1); len(ds) != 0 {
		t.Fatalf("fetched %+v at the limit", ds)
	}
	b.ack(first...)
	if got := b.client.SMembers(b.ctx, k.Held("lim")).Val(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("l:lim after the untracked lease's ack: %q, want [b]", got)
	}
	if ds := b.fetch("w", 1); len(ds) != 0 {
		t.Fatalf("fetched %+v after an untracked ack, still at the limit", ds)
	}
	b.ack(second...)
	b.dmExists(k.Held("lim"), false)
	if ds := b.fetch("w", 1); len(ds) != 1 || ds[0].ID != "c" {
		t.Fatalf("fetched %+v after the tracked ack, want c", ds)
	}
}

// §13: o:<id> "removed when: its retention ends: a call that writes an outcome deletes up to 20
// expired ones"; outs scores "ms their retention ends".
func TestDataModelOutcomeWritePrunesUpTo20Expired(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ResultRetention: time.Hour})
	k := b.eng.Keys()
	for i := range 25 {
		id := fmt.Sprintf("old%02d", i)
		if err := b.client.HSet(b.ctx, k.Outcome(id), "s", "ok", "f", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.client.ZAdd(b.ctx, k.Outcomes(), redis.Z{Score: float64(1 + i), Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	expired := func() int64 { return b.client.ZCount(b.ctx, k.Outcomes(), "-inf", "1000").Val() }
	b.publish(Message{ID: "x"}, Message{ID: "y"})
	ds := b.fetch("w", 2)
	ackWithResult := func(d Delivery) {
		t.Helper()
		rc := d.Receipt()
		rc.Result = []byte("r")
		if errs, err := b.eng.Ack(b.ctx, []Receipt{rc}); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
	t0 := b.dmMs()
	ackWithResult(ds[0])
	t1 := b.dmMs()
	if n := expired(); n != 5 {
		t.Fatalf("%d expired outcomes after one write, want 25 − 20 = 5", n)
	}
	for i := range 20 {
		b.dmExists(k.Outcome(fmt.Sprintf("old%02d", i)), false)
	}
	b.dmExists(k.Outcome("old20"), true)
	if s := int64(b.client.ZScore(b.ctx, k.Outcomes(), ds[0].ID).Val()); s < t0+3_600_000 || s > t1+3_600_000 {
		t.Fatalf("outs scores %s %d, want the end of its retention in [%d, %d]", ds[0].ID, s, t0+3_600_000, t1+3_600_000)
	}
	ackWithResult(ds[1])
	if n := expired(); n != 0 {
		t.Fatalf("%d expired outcomes after a second write, want 0", n)
	}
}

// §14: cr:<name> holds "def ..., n next tick ms ..., l last tick published ms, lr ..., fc ticks
// fired, mc ticks missed, c created ms, u updated ms, ps 1 while paused"; crons holds "every
// schedule's name, score 0"; crondue "the schedules that are not paused and have a tick left ...
// | the ms at which each is next due"; "Deletion is DEL cr:<name>, ZREM crons, ZREM crondue".
func TestDataModelScheduleKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	k := b.eng.Keys()
	info, err := b.eng.PutSchedule(b.ctx, &ScheduleDef{Name: "s", ScheduleTiming: ScheduleTiming{Every: time.Hour},
		Task: &Message{Payload: []byte("tick")}})
	if err != nil {
		t.Fatal(err)
	}
	rec := b.client.HGetAll(b.ctx, k.Schedule("s")).Val()
	names := make([]string, 0, len(rec))
	for f := range rec {
		names = append(names, f)
	}
	slices.Sort(names)
	if got := strings.Join(names, " "); got != "c def fc l lr mc n u" {
		t.Fatalf("record fields %q, want c def fc l lr mc n u", got)
	}
	next := strconv.FormatInt(info.Next.UnixMilli(), 10)
	if rec["n"] != next || !regexp.MustCompile(`^\d+$`).MatchString(rec["c"]) || rec["fc"] != "0" || rec["mc"] != "0" {
		t.Fatalf("record %v; want n = %s (the next tick), fc and mc 0", rec, next)
	}
	if got := b.dmZset(k.Schedules()); got != "s=0" {
		t.Fatalf("crons = %s, want s=0", got)
	}
	if got := b.dmZset(k.SchedulesDue()); got != "s="+next {
		t.Fatalf("crondue = %s, want s=%s", got, next)
	}
	if err := b.eng.PauseSchedule(b.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if ps := b.client.HGet(b.ctx, k.Schedule("s"), "ps").Val(); ps != "1" {
		t.Fatalf("ps of a paused schedule: %q, want 1", ps)
	}
	b.dmExists(k.SchedulesDue(), false)
	if err := b.eng.ResumeSchedule(b.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.HGet(b.ctx, k.Schedule("s"), "ps").Result(); err != redis.Nil {
		t.Fatalf("ps after the resume: %v, want none", err)
	}
	if got := b.dmZset(k.SchedulesDue()); !strings.HasPrefix(got, "s=") {
		t.Fatalf("crondue after the resume: %q", got)
	}
	if ok, err := b.eng.DeleteSchedule(b.ctx, "s"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	for _, key := range []string{k.Schedule("s"), k.Schedules(), k.SchedulesDue()} {
		b.dmExists(key, false)
	}
}

// §13, o:<id>: "a requeued dead letter's [outcome] stays while the task runs again (readers see
// the task first)".
func TestDataModelRequeuedLetterKeepsItsOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	id := b.publish(Message{KeepOutcome: time.Hour})[0]
	ds := b.fetch("c", 1)
	if _, err := b.eng.Kill(b.ctx, []Failure{{Receipt: ds[0].Receipt(), Reason: "x"}}); err != nil {
		t.Fatal(err)
	}
	if errs, err := b.eng.Requeue(b.ctx, []string{id}); err != nil || errs[0] != nil {
		t.Fatalf("requeue: %v %v", err, errs)
	}
	b.dmExists(b.eng.Keys().Outcome(id), true)
	if o, err := b.eng.Outcome(b.ctx, id); err != nil || o.State != StatePending {
		t.Fatalf("the requeued task's outcome: %+v, %v; want it read as pending", o, err)
	}
}
