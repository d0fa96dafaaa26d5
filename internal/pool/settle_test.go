package pool

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
		{redisErr("ERR Error running script (call to f_0ab1): @user_script:12: -READONLY You can't write against a read only replica."), true},
		{redisErr("OOM command not allowed when used memory > 'maxmemory'."), true},
		{redisErr("ERR max number of clients reached"), true},
		{redisErr("ERR user_script:12: attempt to call a nil value"), false},
		{fmt.Errorf("wrapped: %w", redisErr("WRONGTYPE Operation against a key holding the wrong kind of value")), false},
		{fmt.Errorf("%w: message 0: bad", engine.ErrInvalid), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestMayRetry: a failed settling call is tried again for a Lease after its first failure while
// any handler may run (the leases are extended), whether or not Run's context has ended; once every
// handler has returned, until settleTimeout after that.
func TestMayRetry(t *testing.T) {
	t.Parallel()
	lease := 30 * time.Second
	for _, tc := range []struct {
		name    string
		stopped time.Duration // how long ago every handler had returned (stop), 0: not
		first   time.Duration // how long ago the call first failed
		want    bool
	}{
		{name: "handlers may run, failed just now", first: time.Second, want: true},
		{name: "handlers may run, failed a lease ago", first: lease, want: false},
		{name: "handlers returned just now, failed long ago", stopped: time.Millisecond, first: 20 * time.Second, want: true},
		{name: "handlers returned 10 s ago", stopped: settleTimeout, first: time.Second, want: false},
		{name: "handlers returned just now, failed a lease ago", stopped: time.Millisecond, first: lease, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(lease)
			p := &runner{cfg: &cfg}
			now := time.Now() // here: a parallel subtest may start long after its parent
			if tc.stopped > 0 {
				p.stopAt.Store(now.Add(-tc.stopped).UnixNano())
			}
			if got := p.mayRetry(now.Add(-tc.first)); got != tc.want {
				t.Fatalf("mayRetry = %v, want %v", got, tc.want)
			}
		})
	}
}
