package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

// TestPagesAtAMillionPartitions: with 1,000,000 partitions holding a task each, 2,000 leased
// tasks and 500 dead letters, every page of the dashboard (the task lists by state and the
// workers page among them) costs under 50 ms of Redis time, from
// the slow log of a Redis of its own (every command with the time it ran; Redis 7 logs the
// commands a script runs as well as the script, so the sum is an upper bound). The pages ask for
// the largest page size.
func TestPagesAtAMillionPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds a million partitions")
	}
	srv := redistest.StartReal(t, "Redis time from its SLOWLOG")
	// A call of 2,000 tasks takes well under a second, but a loaded machine (the suite on two
	// cores) has stalled one past go-redis's 3-second read timeout.
	c := srv.ClientWith(t, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = time.Minute, time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const prefix, queue, n = "srqscale", "big", 1_000_000
	e, err := engine.New(c, engine.Config{Queue: queue, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterQueue(ctx, c, prefix, queue, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	payload := []byte("twenty bytes payload")
	const chunk = 2000 // well under a second a call, even on a loaded machine
	for from := 0; from < n; from += chunk {
		msgs := make([]engine.Message, 0, chunk)
		for i := from; i < from+chunk; i++ {
			msgs = append(msgs, engine.Message{Partition: partition.Key(fmt.Sprint("p", i)), Payload: payload})
		}
		if _, err := e.Publish(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	leased, err := e.Fetch(ctx, "scale-test", 2000, time.Hour)
	if err != nil || len(leased) != 2000 {
		t.Fatalf("fetch: %d, %v", len(leased), err)
	}
	failures := make([]engine.Failure, 500)
	for i := range failures {
		failures[i] = engine.Failure{Receipt: leased[i].Receipt(), Reason: "boom"}
	}
	if _, err := e.Kill(ctx, failures); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded in %v", time.Since(start).Round(time.Millisecond))

	in, err := inspect.New(c, inspect.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(in, Config{PageSize: inspect.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := c.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	q := "q=" + url.QueryEscape(queue)
	pages := []string{
		"/", "/queue?" + q, "/api/stats?" + q,
		"/partitions?" + q, "/partitions?by=age&" + q, "/partitions?by=paused&" + q,
		"/partition?p=p7&" + q, "/partition?p=p7&view=delayed&" + q,
		"/inflight?" + q, "/inflight?offset=1000&" + q,
		"/dead?" + q, "/dead?error=nomatch&" + q, "/dead?partition=p7&" + q,
		"/task?id=" + url.QueryEscape(leased[1000].ID) + "&" + q,
		"/partitions?by=held&" + q, "/flows?" + q, "/flows?ended=1&" + q, "/events?" + q, "/api/events?" + q,
		"/tasks?" + q, "/tasks?state=delayed&" + q, "/tasks?state=completed&" + q, "/tasks?cursor=1:500000.0&" + q,
		"/workers?" + q, "/schedules?" + q, "/task?id=" + url.QueryEscape(leased[1].ID) + "&" + q,
	}
	for _, page := range pages {
		if err := c.SlowLogReset(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := http.Get(hs.URL + page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", page, res.StatusCode, body)
		}
		logs, err := c.SlowLogGet(ctx, 100_000).Result()
		if err != nil {
			t.Fatal(err)
		}
		var d time.Duration
		for _, l := range logs {
			if len(l.Args) > 0 && strings.EqualFold(l.Args[0], "slowlog") {
				continue
			}
			d += l.Duration
		}
		t.Logf("%-40s %8.3f ms of Redis time in %d commands", page, float64(d.Microseconds())/1000, len(logs))
		if d > 50*time.Millisecond {
			t.Errorf("GET %s took %v of Redis time, the budget is 50ms", page, d)
		}
	}
}
