// Command quickstart shows srq end to end: per-user events in ordered partitions and plain jobs
// share one pool of workers; a failed event is retried without breaking its user's order; a job
// that keeps failing ends in the dead letters. It runs on an embedded Redis unless REDIS_URL names
// a real one, and ends by itself with a summary; interrupted (Ctrl-C, SIGTERM), it stops its worker
// and deletes its queue first.
//
//	go run ./examples/quickstart
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
)

// Work is the payload of every task in this example: a user's event, or a plain job.
type Work struct {
	User string // empty for plain jobs
	Seq  int
	Job  string
}

func main() {
	// Ctrl-C (SIGINT) or SIGTERM ends ctx: run stops its worker, deletes its queue and returns, and
	// the program exits 0. A second signal stops it at once, as the default handling does.
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
	q, err := srq.NewQueue[Work](client, srq.QueueConfig{Name: fmt.Sprintf("quickstart-%d", time.Now().UnixNano())})
	if err != nil {
		return err
	}
	// The queue goes when the example ends, also when it is interrupted: on a real Redis it would
	// otherwise stay registered. Its worker has stopped by then, and left the queue's consumers.
	defer func() {
		_, derr := srq.DeleteQueue(context.WithoutCancel(ctx), client, q.Name(), nil)
		err = errors.Join(err, derr)
	}()

	// Each user's events go to the user's ordered partition; plain jobs to the base partition.
	var msgs []srq.Message[Work]
	for seq := 1; seq <= 4; seq++ {
		for _, user := range []string{"alice", "bob", "carol"} {
			msgs = append(msgs, srq.Message[Work]{Value: Work{User: user, Seq: seq},
				Opts: srq.PublishOpts{Partition: user, Ordered: true}})
		}
	}
	for _, job := range []string{"resize image", "send digest", "poison"} {
		msgs = append(msgs, srq.Message[Work]{Value: Work{Job: job}, Opts: srq.PublishOpts{ID: "job: " + job, MaxAttempts: 2}})
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		return err
	}
	fmt.Printf("published %d tasks\n", len(msgs))

	var (
		mu      sync.Mutex
		events  = map[string][]string{}
		jobs    []string
		retries []string
	)
	handler := srq.HandlerFunc[Work](func(ctx context.Context, t *srq.Task[Work]) error {
		w := t.Value
		mu.Lock()
		defer mu.Unlock()
		switch {
		case w.User == "bob" && w.Seq == 2 && t.Attempt == 1:
			// A flaky downstream: bob's partition waits, his later events stay behind this one.
			retries = append(retries, fmt.Sprintf("bob #2 (attempt %d)", t.Attempt))
			return srq.RejectWithDelay(100*time.Millisecond, errors.New("downstream timeout"))
		case w.Job == "poison":
			return errors.New("cannot parse payload")
		case w.User != "":
			events[w.User] = append(events[w.User], fmt.Sprintf("#%d", w.Seq))
		default:
			jobs = append(jobs, w.Job)
		}
		return nil
	})
	w, err := srq.NewWorker(q, handler, srq.WorkerConfig{
		Concurrency: 8,
		Retry:       srq.ExponentialBackoff(50*time.Millisecond, time.Second),
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	runCtx, stopWorker := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	// Wait until nothing is pending or leased, then stop the worker gracefully: Run returns once
	// its handlers are done and its acks are written.
	err = waitIdle(ctx, q)
	stopWorker()
	if err := errors.Join(err, <-ran); err != nil {
		return err
	}

	users := make([]string, 0, len(events))
	for u := range events {
		users = append(users, u)
	}
	sort.Strings(users)
	fmt.Println("events per user, in order:")
	for _, u := range users {
		fmt.Printf("  %-6s %s\n", u, strings.Join(events[u], " "))
	}
	sort.Strings(jobs)
	fmt.Println("plain jobs done:", strings.Join(jobs, ", "))
	fmt.Println("retried:", strings.Join(retries, ", "))
	page, err := q.DeadLetters(ctx, srq.DeadQuery{Limit: 10})
	if err != nil {
		return err
	}
	for _, d := range page.Letters {
		fmt.Printf("dead letter: %s after %d attempts: %s\n", d.ID, d.Attempts, d.Error)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("summary: %d published, %d acked, %d dead-lettered\n", st.Published, st.Acked, st.DeadLettered)
	return nil
}

// waitIdle returns once q has no task pending or leased, or with ctx's error when ctx ends first.
func waitIdle(ctx context.Context, q *srq.Queue[Work]) error {
	for {
		st, err := q.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Pending == 0 && st.InFlight == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
