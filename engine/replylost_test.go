package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// blockScript keeps Redis busy for ARGV[1] ms, reading the clock in a loop: every other client's
// commands wait in the server's buffers meanwhile, as behind any long script.
const blockScript = `local function ms() local t = redis.call('TIME') return t[1] * 1000 + t[2] / 1000 end
local stop = ms() + tonumber(ARGV[1])
while ms() < stop do end
return 1`

// blockRedis starts a script that keeps the server of admin busy for d and returns once the server
// is busy (a PING with a short timeout goes unanswered), with a channel closed when the script has
// ended. probe is a client of the same server with a short ReadTimeout.
func blockRedis(ctx context.Context, t *testing.T, admin, probe *redis.Client, d time.Duration) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = admin.Eval(ctx, blockScript, nil, d.Milliseconds()).Err()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for probe.Ping(ctx).Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the server never became busy")
		}
	}
	return done
}

// blockableServer starts a redis-server of the test's own, which blockRedis may keep busy, and
// returns it, a context for the test (a minute) and an admin client.
func blockableServer(t *testing.T) (*redistest.Server, context.Context, *redis.Client) {
	t.Helper()
	srv := redistest.StartReal(t, "a script on the server's own thread keeps every client waiting")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return srv, ctx, srv.Client(t)
}

// probeClient returns a client of srv that gives up on a reply after 20 ms and never sends a
// command again: blockRedis's probe of whether the server is busy.
func probeClient(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	opt := srv.Options()
	opt.ReadTimeout, opt.MaxRetries = 20*time.Millisecond, -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// warm opens n connections of c and puts them back in its pool: a call sent again after a read
// timeout then goes out on one of them at once, rather than on a new connection whose handshake
// would time out first, ending the retries.
func warm(ctx context.Context, t *testing.T, c *redis.Client, n int) {
	t.Helper()
	conns := make([]*redis.Conn, n)
	for i := range conns {
		conns[i] = c.Conn()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, cn := range conns {
		_ = cn.Close()
	}
}

// TestLostReplyIsAnError sends script calls whose reply cannot arrive within the client's
// ReadTimeout, because the server is busy with a longer script: they run when it ends, after
// go-redis gave up reading. go-redis sends a call again after a read timeout (MaxRetries), so
// each call would run twice, and the second run's answers (the tasks were rejected already:
// ErrStaleToken; published already: duplicates; acked already: ErrNotFound) would reach the caller
// with a nil error. The caller must get either the true results or ErrReplyLost. The retries here
// come 1 ms apart, so the last of them is sent while the server is still busy and answered.
func TestLostReplyIsAnError(t *testing.T) {
	t.Parallel()
	srv, ctx, admin := blockableServer(t)
	opt := srv.Options()
	opt.ReadTimeout = 100 * time.Millisecond
	opt.MaxRetries = 20
	opt.MinRetryBackoff, opt.MaxRetryBackoff = time.Millisecond, time.Millisecond
	opt.PoolSize = 10
	short := redis.NewClient(opt)
	t.Cleanup(func() { _ = short.Close() })
	probe := probeClient(t, srv)
	const block = 300 * time.Millisecond

	type call struct {
		name string
		// prepare seeds the queue of b and returns the call, which runs on short, an engine of the
		// same queue over the short client, and check, which fails t unless the call's results
		// (when err is nil) are true of the queue.
		prepare func(t *testing.T, b *bundle, short *Engine) (run func() (any, error), check func(any))
		// once reads from the queue's counters how often the call ran: 0 or 1 times, or 2 when it
		// ran twice.
		once func(st Stats) int64
	}
	ordered := partition.Ordered("run")
	calls := []call{
		{"reject", func(t *testing.T, b *bundle, short *Engine) (func() (any, error), func(any)) {
			ds := leaseRun(t, b, ordered, 20)
			rs := make([]Rejection, len(ds))
			for i := range ds {
				rs[i] = Rejection{Receipt: ds[len(ds)-1-i].Receipt(), Reason: "tail first"}
			}
			return func() (any, error) { return short.Reject(ctx, rs) }, func(v any) {
				for i, r := range v.([]RejectResult) {
					if r.Err != nil || r.DeadLettered {
						t.Fatalf("item %d: %+v with a nil error", i, r)
					}
				}
				if st := b.stats(); st.Pending != int64(len(ds)) || st.InFlight != 0 {
					t.Fatalf("after a reject of %d: %+v", len(ds), st)
				}
			}
		}, func(st Stats) int64 { return (st.Rejected + st.TakenBack) / 20 }},
		{"ack", func(t *testing.T, b *bundle, short *Engine) (func() (any, error), func(any)) {
			ds := leaseRun(t, b, ordered, 20)
			rs := make([]Receipt, len(ds))
			for i := range ds {
				rs[i] = ds[i].Receipt()
			}
			return func() (any, error) { return short.Ack(ctx, rs) }, func(v any) {
				if err := errors.Join(v.([]error)...); err != nil {
					t.Fatalf("ack results with a nil error: %v", err)
				}
				if st := b.stats(); st.Pending != 0 || st.InFlight != 0 {
					t.Fatalf("after an ack of %d: %+v", len(ds), st)
				}
			}
		}, func(st Stats) int64 { return st.Acked / 20 }},
		{"publish", func(t *testing.T, b *bundle, short *Engine) (func() (any, error), func(any)) {
			msgs := make([]Message, 20)
			for i := range msgs {
				msgs[i] = Message{ID: fmt.Sprint("m", i), Partition: ordered}
			}
			return func() (any, error) { return short.Publish(ctx, msgs) }, func(v any) {
				for i, r := range v.([]PublishResult) {
					if r.Duplicate {
						t.Fatalf("message %d reported a duplicate with a nil error", i)
					}
				}
				if st := b.stats(); st.Pending != int64(len(msgs)) {
					t.Fatalf("after a publish of %d: %+v", len(msgs), st)
				}
			}
		}, func(st Stats) int64 { return (st.Published + st.Duplicates) / 20 }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			lost := 0
			for round := 0; round < 5 && lost < 2; round++ {
				b := &bundle{t: t, ctx: ctx, client: admin}
				var err error
				if b.eng, err = New(admin, Config{Queue: redistest.Queue(t)}); err != nil {
					t.Fatal(err)
				}
				e, err := New(short, b.eng.Config())
				if err != nil {
					t.Fatal(err)
				}
				run, check := c.prepare(t, b, e)
				warm(ctx, t, short, opt.PoolSize)
				done := blockRedis(ctx, t, admin, probe, block)
				res, err := run()
				<-done
				switch {
				case err == nil:
					check(res)
				case errors.Is(err, ErrReplyLost):
					if n := c.once(b.stats()); n > 1 {
						t.Fatalf("round %d: the call ran %d times", round, n)
					}
					if lost++; lost == 1 {
						t.Logf("round %d: %v", round, err)
					}
				default:
					t.Fatalf("round %d: %v; want the true results or ErrReplyLost", round, err)
				}
			}
			if lost == 0 {
				t.Fatal("no call lost its reply: the server was never busy long enough to test anything")
			}
		})
	}
}

// leaseRun publishes n tasks to p and leases them all with one fetch.
func leaseRun(t *testing.T, b *bundle, p partition.Key, n int) []Delivery {
	t.Helper()
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Partition: p}
	}
	b.publish(msgs...)
	ds := b.fetch("c", n)
	if len(ds) != n {
		t.Fatalf("fetched %d of %d", len(ds), n)
	}
	return ds
}

// TestClusterRedirectIsSentAgain moves the slot of a queue to another master behind the back of a
// cluster client that knows the old owner: the client's next script call meets MOVED, which the
// server answers without running it, and goes to the new owner, where it runs. Then it starts to
// move the slot back: a script call meets TRYAGAIN (its keys are being migrated), which go-redis
// sends again, to end with TRYAGAIN, not ErrReplyLost. sendOnce lets those writes through. The
// test moves a slot, so it runs on a cluster of its own.
func TestClusterRedirectIsSentAgain(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterWith(t, redistest.ClusterOptions{Replicas: -1})
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := New(cl, Config{Queue: queueOnMaster(t, c, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Stats(ctx); err != nil { // the client learns the slots
		t.Fatal(err)
	}
	slot := redistest.KeySlot(e.Keys().Ready())
	from, to := c.Masters()[0], c.Masters()[1]
	toID, err := c.Admin(to).ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{to, from, c.Masters()[2]} { // the new owner first, as redis-cli does
		if err := c.Admin(addr).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err(); err != nil {
			t.Fatalf("move slot %d on %s: %v", slot, addr, err)
		}
	}
	res, err := e.Publish(ctx, []Message{{ID: "a"}, {ID: "b"}})
	if err != nil || len(res) != 2 || res[0].Duplicate || res[1].Duplicate {
		t.Fatalf("publish after the move: %+v, %v", res, err)
	}
	if n, err := c.Admin(to).Exists(ctx, e.Keys().Task("a")).Result(); err != nil || n != 1 {
		t.Fatalf("the new owner holds task a: %d, %v", n, err)
	}
	ds, err := e.Fetch(ctx, "c", 2, time.Minute)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}

	fromID, err := c.Admin(from).ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Admin(from).Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", toID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin(to).Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", fromID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin(to).ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = e.Ack(ctx, []Receipt{ds[0].Receipt()})
	if !redis.HasErrorPrefix(err, "TRYAGAIN") || errors.Is(err, ErrReplyLost) {
		t.Fatalf("ack during the migration: %v; want TRYAGAIN", err)
	}
	info, err := c.Admin(to).Info(ctx, "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := infoCount(info, "errorstat_TRYAGAIN"); n < 2 {
		t.Fatalf("the old owner answered TRYAGAIN %d times; want the call sent again\n%s", n, info)
	}
}

// infoCount reads the count=N of line name in an INFO reply; 0 when absent.
func infoCount(info, name string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":count="); ok {
			n, _ := strconv.Atoi(strings.SplitN(v, ",", 2)[0])
			return n
		}
	}
	return 0
}

// On a client made with ContextTimeoutEnabled, a call whose context ends while its reply is
// awaited fails with ErrReplyLost (it may have run); on a client without it, go-redis reads the
// reply, and the call returns its result (guarantees.md, Lost replies).
func TestContextEndWhileTheReplyIsAwaited(t *testing.T) {
	t.Parallel()
	srv, ctx, admin := blockableServer(t)
	probe := probeClient(t, srv)
	for _, cte := range []bool{true, false} {
		opt := srv.Options()
		opt.ContextTimeoutEnabled = cte
		c := redis.NewClient(opt)
		t.Cleanup(func() { _ = c.Close() })
		e, err := New(c, Config{Queue: fmt.Sprint("cte-", cte)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Publish(ctx, []Message{{ID: "warm"}}); err != nil { // scripts loaded
			t.Fatal(err)
		}
		done := blockRedis(ctx, t, admin, probe, 500*time.Millisecond)
		short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err = e.Publish(short, []Message{{ID: "a"}})
		stop()
		<-done
		switch {
		case cte && !errors.Is(err, ErrReplyLost):
			t.Errorf("ContextTimeoutEnabled: %v, want ErrReplyLost", err)
		case !cte && err != nil:
			t.Errorf("without ContextTimeoutEnabled: %v, want the reply read", err)
		}
	}
}
