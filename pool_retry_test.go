package srq

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
)

// redisErr is an error as go-redis returns Redis's error replies.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestTransient: the failed calls that settle tasks are tried again only when another try may
// pass.
func TestTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("read tcp 127.0.0.1:1234: connection reset by peer"), true},
		{fmt.Errorf("srq: ack: %w", errors.New("i/o timeout")), true},
		{redisErr("READONLY You can't write against a read only replica."), true},
		{redisErr("LOADING Redis is loading the dataset in memory"), true},
		{redisErr("CLUSTERDOWN The cluster is down"), true},
		{redisErr("ERR user_script:12: attempt to call a nil value"), false},
		{fmt.Errorf("wrapped: %w", redisErr("WRONGTYPE Operation against a key holding the wrong kind of value")), false},
		{fmt.Errorf("%w: message 0: bad", engine.ErrInvalid), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestMayRetry: while the worker runs, a failed settling call is tried again for a Lease after
// its first failure; once it stops, every call only until settleTimeout after the stop began.
func TestMayRetry(t *testing.T) {
	t.Parallel()
	lease := 30 * time.Second
	for _, tc := range []struct {
		name     string
		stopping bool          // Run's context ended
		stopped  time.Duration // how long ago the pool began to stop (stop), 0: not
		first    time.Duration // how long ago the call first failed
		want     bool
	}{
		{name: "running, failed just now", first: time.Second, want: true},
		{name: "running, failed a lease ago", first: lease, want: false},
		{name: "stopped just now, failed long ago", stopped: time.Millisecond, first: 20 * time.Second, want: true},
		{name: "stopped a settle timeout ago", stopped: settleTimeout, first: time.Second, want: false},
		{name: "Run's context ended: the stop begins now", stopping: true, first: 20 * time.Second, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ch := make(chan struct{})
			if tc.stopping {
				close(ch)
			}
			p := &pool{w: &Worker{cfg: WorkerConfig{Lease: lease}}, stopping: ch}
			now := time.Now() // here: a parallel subtest may start long after its parent
			if tc.stopped > 0 {
				p.stopAt.Store(now.Add(-tc.stopped).UnixNano())
			}
			if got := p.mayRetry(now.Add(-tc.first)); got != tc.want {
				t.Fatalf("mayRetry = %v, want %v", got, tc.want)
			}
			if tc.stopping && p.stopAt.Load() == 0 {
				t.Fatal("the stop was not noted when Run's context was seen ended")
			}
		})
	}
}
