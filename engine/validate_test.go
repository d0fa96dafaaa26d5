package engine

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// validateMaxPayload is the payload limit the validation tests configure.
const validateMaxPayload = 16

// assertNothingWritten checks that b's queue has no key at all in Redis and that no counter moved.
func (b *bundle) assertNothingWritten() {
	b.t.Helper()
	if keys := b.keysInRedis(); len(keys) != 0 {
		b.t.Fatalf("a refused call wrote keys: %q", keys)
	}
	s := b.stats()
	s.ServerTime = time.Time{}
	if s != (Stats{}) {
		b.t.Fatalf("a refused call changed the stats: %+v", s)
	}
}

// validMsg is a message every test configuration accepts.
func validMsg(id string) Message {
	return Message{ID: id, Partition: "p", Payload: []byte("x")}
}

func TestValidatePublishRejects(t *testing.T) {
	t.Parallel()
	one := func(m Message) []Message { return []Message{m} }
	tooBig := make([]byte, validateMaxPayload+1)
	longID := strings.Repeat("a", MaxIDLen+1)
	longP := partition.Key(strings.Repeat("p", partition.MaxLen+1))
	tests := []struct {
		name   string
		msgs   []Message
		only64 bool // the priority is out of range only where int has 64 bits
	}{
		{name: "id too long", msgs: one(Message{ID: longID})},
		{name: "id too long multibyte", msgs: one(Message{ID: strings.Repeat("ü", MaxIDLen/2+1)})},
		{name: "id invalid utf8", msgs: one(Message{ID: "\xff"})},
		{name: "id truncated rune", msgs: one(Message{ID: "task-" + "ü"[:1]})},
		{name: "partition bare bang", msgs: one(Message{Partition: partition.Ordered("")})},
		{name: "partition invalid utf8", msgs: one(Message{Partition: "\xff"})},
		{name: "ordered partition invalid utf8", msgs: one(Message{Partition: "!\xc3"})},
		{name: "partition too long", msgs: one(Message{Partition: longP})},
		{name: "ordered partition too long", msgs: one(Message{Partition: partition.Ordered(string(longP[1:]))})},
		{name: "priority above int32", only64: true, msgs: one(Message{Priority: int(validateMaxPriority + 1)})},
		{name: "priority below int32", only64: true, msgs: one(Message{Priority: int(validateMinPriority - 1)})},
		{name: "priority max int", only64: true, msgs: one(Message{Priority: math.MaxInt})},
		{name: "priority min int", only64: true, msgs: one(Message{Priority: math.MinInt})},
		{name: "negative delay", msgs: one(Message{Delay: -time.Nanosecond})},
		{name: "negative delay hour", msgs: one(Message{Delay: -time.Hour})},
		{name: "delay and at", msgs: one(Message{Delay: time.Millisecond, At: time.Now()})},
		{name: "at before 1970", msgs: one(Message{At: time.Unix(0, -int64(time.Millisecond))})},
		{name: "negative max attempts", msgs: one(Message{MaxAttempts: -1})},
		{name: "payload over limit", msgs: one(Message{Payload: tooBig})},
		{name: "delay over limit", msgs: one(Message{Delay: MaxDelay + time.Millisecond})},
		{name: "at after year 9999", msgs: one(Message{At: MaxAt.Add(time.Second)})},
		{name: "at in year 4 million", msgs: one(Message{At: time.Date(4_000_000, 1, 1, 0, 0, 0, 0, time.UTC)})},
		{name: "headers over limit", msgs: one(Message{Headers: map[string]string{"h": strings.Repeat("x", MaxHeaderBytes)}})},
		{name: "only the last of a batch is bad", msgs: []Message{
			validMsg("a"), validMsg("b"), {ID: "c", Partition: partition.Ordered("u"), Payload: tooBig},
		}},
		{name: "only the middle of a batch is bad", msgs: []Message{
			validMsg("a"), {ID: "b", Partition: "!"}, validMsg("c"),
		}},
		{name: "generated ids before a bad one", msgs: []Message{
			validMsg(""), validMsg(""), {MaxAttempts: -5},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.only64 && strconv.IntSize < 64 {
				t.Skip("int has 32 bits: every int is a valid priority")
			}
			b := setup(t, Config{MaxPayloadBytes: validateMaxPayload})
			res, err := b.eng.Publish(b.ctx, tt.msgs)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Publish = %+v, %v; want ErrInvalid", res, err)
			}
			if res != nil {
				t.Fatalf("Publish failed but returned %+v", res)
			}
			b.assertNothingWritten()
		})
	}
}

// The priority limits as variables, so that one past them is not a constant expression, which
// would not compile where int has 32 bits.
var validateMaxPriority, validateMinPriority int64 = MaxPriority, MinPriority

func TestValidatePublishAcceptsLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    Message
	}{
		{"generated id", Message{}},
		{"id at limit", Message{ID: strings.Repeat("a", MaxIDLen)}},
		{"id at limit multibyte", Message{ID: strings.Repeat("ü", MaxIDLen/2)}},
		{"partition at limit", Message{Partition: partition.Key(strings.Repeat("p", partition.MaxLen))}},
		{"ordered partition at limit", Message{Partition: partition.Ordered(strings.Repeat("p", partition.MaxLen-1))}},
		{"ordered partition of bang", Message{Partition: partition.Ordered("!")}},
		{"max priority", Message{Priority: MaxPriority}},
		{"min priority", Message{Priority: MinPriority}},
		{"at without delay", Message{At: time.Now().Add(time.Hour)}},
		{"at 1970", Message{At: time.Unix(0, 0)}},
		{"delay without at", Message{Delay: time.Hour}},
		{"delay at limit", Message{Delay: MaxDelay}},
		{"at at limit", Message{At: MaxAt}},
		{"zero max attempts", Message{MaxAttempts: 0}},
		{"payload at limit", Message{Payload: make([]byte, validateMaxPayload)}},
		{"empty payload", Message{Payload: nil}},
		{"headers", Message{Headers: map[string]string{"": "\xff"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{MaxPayloadBytes: validateMaxPayload})
			ids := b.publish(tt.m)
			info, err := b.eng.Task(b.ctx, ids[0])
			if err != nil {
				t.Fatalf("Task(%q): %v", ids[0], err)
			}
			if info.Partition != tt.m.Partition || info.Priority != tt.m.Priority || string(info.Payload) != string(tt.m.Payload) {
				t.Fatalf("Task = partition %q priority %d payload %q; published %q %d %q", info.Partition,
					info.Priority, info.Payload, tt.m.Partition, tt.m.Priority, tt.m.Payload)
			}
			if s := b.stats(); s.Published != 1 {
				t.Fatalf("Published = %d, want 1", s.Published)
			}
		})
	}
}

func TestValidateNewConfig(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	long := strings.Repeat("q", MaxNameLen+1)
	tests := []struct {
		name   string
		client redis.UniversalClient
		cfg    Config
	}{
		{"nil client", nil, Config{Queue: "q"}},
		{"typed nil client", (*redis.Client)(nil), Config{Queue: "q"}},
		{"typed nil cluster client", (*redis.ClusterClient)(nil), Config{Queue: "q"}},
		{"negative dedup window", client, Config{Queue: "q", DedupWindow: -time.Second}},
		{"empty queue", client, Config{}},
		{"queue with open brace", client, Config{Queue: "{q"}},
		{"queue with close brace", client, Config{Queue: "q}"}},
		{"queue with hash tag", client, Config{Queue: "{q}"}},
		{"queue invalid utf8", client, Config{Queue: "q\xff"}},
		{"queue too long", client, Config{Queue: long}},
		{"prefix with brace", client, Config{Queue: "q", Prefix: "srq{"}},
		{"prefix invalid utf8", client, Config{Queue: "q", Prefix: "\xff"}},
		{"prefix too long", client, Config{Queue: "q", Prefix: long}},
		{"negative recover chunk", client, Config{Queue: "q", RecoverChunk: -1}},
		{"negative max ordered run", client, Config{Queue: "q", MaxOrderedRun: -1}},
		{"negative max payload", client, Config{Queue: "q", MaxPayloadBytes: -1}},
		{"max block under 1ms", client, Config{Queue: "q", MaxBlock: time.Millisecond - 1}},
		{"negative max block", client, Config{Queue: "q", MaxBlock: -time.Second}},
		{"negative max merge", client, Config{Queue: "q", MaxMerge: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := New(tt.client, tt.cfg)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("New = %v, %v; want ErrInvalid", e, err)
			}
			if e != nil {
				t.Fatalf("New failed but returned an engine")
			}
		})
	}
}

func TestValidateNewDefaults(t *testing.T) {
	t.Parallel()
	e, err := New(redistest.Client(t), Config{Queue: "q", DeadLetterMaxCount: -1, DeadLetterMaxAge: -1})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	cfg := e.Config()
	if cfg.Prefix != DefaultPrefix || cfg.RecoverChunk != DefaultRecoverChunk || cfg.MaxPayloadBytes != DefaultMaxPayloadBytes ||
		cfg.MaxBlock != DefaultMaxBlock || cfg.MaxMerge != DefaultMaxMerge {
		t.Fatalf("defaults not filled in: %+v", cfg)
	}
	if count, age := e.deadCaps(); count != 0 || age != 0 {
		t.Fatalf("negative dead-letter caps = %d, %d; want 0, 0 (no cap)", count, age)
	}
	if e.Keys().Base() != "srq:{q}:" {
		t.Fatalf("Base() = %q", e.Keys().Base())
	}
}

// TestValidateArguments checks that every call refuses bad arguments with ErrInvalid before it
// writes anything.
func TestValidateArguments(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := Receipt{ID: "x", Token: 1}
	var last int64 = maxSortedSet // a variable, so that this compiles where int has 32 bits
	tests := []struct {
		name string
		call func() error
	}{
		{"fetch zero", func() error { _, err := b.eng.Fetch(b.ctx, "c", 0, time.Second); return err }},
		{"fetch negative", func() error { _, err := b.eng.Fetch(b.ctx, "c", -1, time.Second); return err }},
		{"fetch zero lease", func() error { _, err := b.eng.Fetch(b.ctx, "c", 1, 0); return err }},
		{"fetch lease under 1ms", func() error { _, err := b.eng.Fetch(b.ctx, "c", 1, time.Millisecond-1); return err }},
		{"fetch negative lease", func() error { _, err := b.eng.Fetch(b.ctx, "c", 1, -time.Second); return err }},
		{"fetch empty consumer", func() error { _, err := b.eng.Fetch(b.ctx, "", 1, time.Second); return err }},
		// Lua would format a count near 2^63 as a negative number and find nothing, silently.
		{"fetch over MaxFetch", func() error { _, err := b.eng.Fetch(b.ctx, "c", MaxFetch+1, time.Second); return err }},
		{"fetch of MaxInt", func() error { _, err := b.eng.Fetch(b.ctx, "c", math.MaxInt, time.Second); return err }},
		{"ack fetch over MaxFetch", func() error {
			_, _, _, err := b.eng.AckFetch(b.ctx, nil, "c", MaxFetch+1, time.Second)
			return err
		}},
		{"fetch wait zero", func() error { _, err := b.eng.FetchWait(b.ctx, "c", 0, time.Second, time.Second); return err }},
		{"fetch wait short lease", func() error {
			_, err := b.eng.FetchWait(b.ctx, "c", 1, time.Microsecond, time.Second)
			return err
		}},
		{"fetch wait empty consumer", func() error { _, err := b.eng.FetchWait(b.ctx, "", 1, time.Second, time.Second); return err }},
		{"reject negative delay", func() error {
			_, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: r, Delay: -time.Millisecond}})
			return err
		}},
		{"reject negative delay last", func() error {
			_, err := b.eng.Reject(b.ctx, []Rejection{{Receipt: r}, {Receipt: r, Delay: -1}})
			return err
		}},
		{"extend zero lease", func() error { _, _, err := b.eng.Extend(b.ctx, []Receipt{r}, 0); return err }},
		{"extend lease under 1ms", func() error {
			_, _, err := b.eng.Extend(b.ctx, []Receipt{r}, time.Millisecond-1)
			return err
		}},
		{"extend nothing with bad lease", func() error { _, _, err := b.eng.Extend(b.ctx, nil, -time.Second); return err }},
		{"concurrency of ordered", func() error { return b.eng.SetConcurrency(b.ctx, partition.Ordered("u"), 2) }},
		{"concurrency of ordered zero", func() error { return b.eng.SetConcurrency(b.ctx, partition.Ordered("u"), 0) }},
		{"concurrency negative", func() error { return b.eng.SetConcurrency(b.ctx, "p", -1) }},
		{"concurrency bad partition", func() error { return b.eng.SetConcurrency(b.ctx, "\xff", 1) }},
		{"pause bare bang", func() error { return b.eng.Pause(b.ctx, "!") }},
		{"resume invalid utf8", func() error { return b.eng.Resume(b.ctx, "\xff") }},
		{"dead letters negative offset", func() error { _, err := b.eng.DeadLetters(b.ctx, -1, 10); return err }},
		{"dead letters zero limit", func() error { _, err := b.eng.DeadLetters(b.ctx, 0, 0); return err }},
		{"dead letters negative limit", func() error { _, err := b.eng.DeadLetters(b.ctx, 0, -1); return err }},
		{"dead letters limit too big", func() error { _, err := b.eng.DeadLetters(b.ctx, 0, 10001); return err }},
		// Lua would send the offset to Redis as 9.2233720368548e+18, which it does not accept.
		{"dead letters offset MaxInt", func() error { _, err := b.eng.DeadLetters(b.ctx, math.MaxInt, 1); return err }},
		{"dead letters offset past a sorted set", func() error { _, err := b.eng.DeadLetters(b.ctx, int(last+1), 1); return err }},
		{"task empty id", func() error { _, err := b.eng.Task(b.ctx, ""); return err }},
		{"task id too long", func() error { _, err := b.eng.Task(b.ctx, strings.Repeat("a", MaxIDLen+1)); return err }},
		{"task id invalid utf8", func() error { _, err := b.eng.Task(b.ctx, "\xff"); return err }},
		{"requeue empty id", func() error { _, err := b.eng.Requeue(b.ctx, []string{"a", ""}); return err }},
		{"requeue invalid utf8", func() error { _, err := b.eng.Requeue(b.ctx, []string{"\xff"}); return err }},
		{"in flight negative offset", func() error { _, _, err := b.eng.InFlight(b.ctx, -1, 1); return err }},
		{"in flight zero limit", func() error { _, _, err := b.eng.InFlight(b.ctx, 0, 0); return err }},
		{"in flight past MaxInspectPage", func() error { _, _, err := b.eng.InFlight(b.ctx, MaxInspectPage, 1); return err }},
		// offset+limit wraps around to a negative number.
		{"in flight offset MaxInt", func() error { _, _, err := b.eng.InFlight(b.ctx, math.MaxInt, 1); return err }},
		{"in flight limit MaxInt", func() error { _, _, err := b.eng.InFlight(b.ctx, 1, math.MaxInt); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
	// The limits themselves are accepted.
	if _, err := b.eng.DeadLetters(b.ctx, 0, 10000); err != nil {
		t.Fatalf("DeadLetters(0, 10000): %v", err)
	}
	if _, err := b.eng.DeadLetters(b.ctx, int(last), 10000); err != nil {
		t.Fatalf("DeadLetters(2^32-1, 10000): %v", err)
	}
	if _, _, err := b.eng.InFlight(b.ctx, MaxInspectPage-1, 1); err != nil {
		t.Fatalf("InFlight(MaxInspectPage-1, 1): %v", err)
	}
	if _, err := b.eng.Fetch(b.ctx, "c", 1, time.Millisecond); err != nil {
		t.Fatalf("Fetch with a 1ms lease: %v", err)
	}
	if _, _, err := b.eng.Extend(b.ctx, nil, time.Millisecond); err != nil {
		t.Fatalf("Extend of nothing with a 1ms lease: %v", err)
	}
	// The refused calls and the accepted ones above, which found nothing to do, wrote nothing but
	// the heartbeat of the consumer that fetched.
	seen, err := b.client.ZRange(b.ctx, b.eng.Keys().Consumers(), 0, -1).Result()
	if err != nil || len(seen) != 1 || seen[0] != "c" {
		t.Fatalf("consumers %q (%v), want the one that fetched", seen, err)
	}
	if err := b.client.Del(b.ctx, b.eng.Keys().Consumers()).Err(); err != nil {
		t.Fatal(err)
	}
	b.assertNothingWritten()
}

func TestClipKeepsUTF8(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxReasonLen-1) + "ü" + "tail"
	got := clip(long)
	if len(got) > MaxReasonLen || !utf8.ValidString(got) || got != strings.Repeat("a", MaxReasonLen-1) {
		t.Fatalf("clip returned %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if clip("short") != "short" {
		t.Fatal("clip changed a short reason")
	}
}
