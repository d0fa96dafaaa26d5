// Command ratelimit shows per-partition rate limiting against a flaky external API. Each
// customer's calls go to the customer's ordered partition; the API allows each customer 2 calls
// per 300ms and answers "429 Too Many Requests" with a Retry-After beyond that. The handler turns a
// 429 into srq.RejectWithDelay, so the customer's partition waits exactly that long with its order
// kept, while other customers go on; the RateLimit middleware keeps most calls under the API's
// limit in the first place. It runs on an embedded Redis unless REDIS_URL names a real one;
// interrupted (Ctrl-C, SIGTERM), it stops its worker and deletes its queue first.
//
//	go run ./examples/ratelimit
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/middleware"
)

// Call is one request to the external API on behalf of a customer.
type Call struct {
	Customer string
	Seq      int
}

// tooManyRequests is the API's 429 answer.
type tooManyRequests struct{ retryAfter time.Duration }

func (e *tooManyRequests) Error() string {
	return fmt.Sprintf("429 Too Many Requests, retry after %v", e.retryAfter)
}

// api is a stand-in for the external service: each customer may make 2 calls per 300ms window.
type api struct {
	mu     sync.Mutex
	window map[string][]time.Time
	calls  int
	denied int
}

func (a *api) call(customer string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	now := time.Now()
	recent := a.window[customer][:0]
	for _, t := range a.window[customer] {
		if now.Sub(t) < 300*time.Millisecond {
			recent = append(recent, t)
		}
	}
	a.window[customer] = recent
	if len(recent) >= 2 {
		a.denied++
		return &tooManyRequests{retryAfter: 300*time.Millisecond - now.Sub(recent[0])}
	}
	a.window[customer] = append(recent, now)
	return nil
}

func main() {
	// Ctrl-C (SIGINT) or SIGTERM ends ctx: run stops its workers, deletes what it made and returns,
	// and the program exits 0. A second signal stops it at once, as the default handling does.
	sig, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	context.AfterFunc(sig, stopSignals)
	ctx, cancel := context.WithTimeout(sig, time.Minute)
	defer cancel()
	client, where, stop, err := devredis.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	fmt.Println("redis:", where)
	err = run(ctx, client)
	if sig.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		fmt.Println("interrupted: stopped and cleaned up")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, client redis.UniversalClient) (err error) {

	// A name of its own, so that a run on a real Redis does not meet another's queue.
	q, err := srq.NewQueue[Call](client, srq.QueueConfig{Name: fmt.Sprintf("ratelimit-%d", time.Now().UnixNano())})
	if err != nil {
		return err
	}
	// The queue goes when the example ends, also when it is interrupted: on a real Redis it would
	// otherwise stay registered. Its worker has stopped by then, and left the queue's consumers.
	defer func() {
		_, derr := srq.DeleteQueue(context.WithoutCancel(ctx), client, q.Name(), nil)
		err = errors.Join(err, derr)
	}()
	customers := []string{"acme", "globex", "initech"}
	var msgs []srq.Message[Call]
	for seq := 1; seq <= 6; seq++ {
		for _, c := range customers {
			msgs = append(msgs, srq.Message[Call]{Value: Call{c, seq}, Opts: srq.PublishOpts{Partition: c, Ordered: true}})
		}
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		return err
	}

	ext := &api{window: map[string][]time.Time{}}
	var mu sync.Mutex
	done := map[string][]int{}
	finished := make(chan struct{})
	handler := srq.HandlerFunc[Call](func(ctx context.Context, t *srq.Task[Call]) error {
		var limited *tooManyRequests
		if err := ext.call(t.Value.Customer); errors.As(err, &limited) {
			// The API said when: wait exactly that long, this customer only, order kept.
			return srq.RejectWithDelay(limited.retryAfter, err)
		} else if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		done[t.Value.Customer] = append(done[t.Value.Customer], t.Value.Seq)
		if n := len(done["acme"]) + len(done["globex"]) + len(done["initech"]); n == len(msgs) {
			close(finished)
		}
		return nil
	})
	// Our own limit, slightly under the API's: 2 per 350ms per customer. Tasks over it are
	// snoozed for exactly the time until the next slot, without using an attempt.
	limit, err := middleware.RateLimit(q, middleware.RateLimitConfig{PerPartition: middleware.Rate{Limit: 2, Per: 350 * time.Millisecond, Burst: 2}})
	if err != nil {
		return err
	}
	w, err := srq.NewWorker(q, handler, srq.WorkerConfig{Concurrency: 6, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: []srq.Middleware{limit}})
	if err != nil {
		return err
	}
	start := time.Now()
	runCtx, stopWorker := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	select {
	case <-finished:
	case <-ctx.Done():
		err = ctx.Err()
	}
	took := time.Since(start)
	// Stop the worker gracefully: Run returns once its handlers are done and its acks written.
	stopWorker()
	if err := errors.Join(err, <-ran); err != nil {
		return err
	}

	sort.Strings(customers)
	for _, c := range customers {
		var seqs []string
		for _, s := range done[c] {
			seqs = append(seqs, fmt.Sprint(s))
		}
		fmt.Printf("%-8s calls in order: %s\n", c, strings.Join(seqs, " "))
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("summary: %d calls made, %d answered 429, %d snoozed or retried, all %d done in %v\n",
		ext.calls, ext.denied, st.Rejected, len(msgs), took.Round(10*time.Millisecond))
	return nil
}
