// Command schedule shows srq's schedules: a task every second and a nightly report in a time
// zone, fired by three schedulers at once, as three replicas of a service would, with no leader:
// each tick is published once, with an id derived from the schedule and the tick. It pauses,
// resumes and triggers a schedule, then deletes both schedules and the queue. It runs on an
// embedded Redis unless REDIS_URL names a real one, and ends by itself after about five seconds
// with a summary; interrupted (Ctrl-C, SIGTERM), it stops its schedulers and worker and deletes its
// schedules and queue first.
//
//	go run ./examples/schedule
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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

// Job is the payload of every tick.
type Job struct {
	Kind string
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
	name := fmt.Sprintf("schedule-%d", time.Now().UnixNano())
	q, err := srq.NewQueue[Job](client, srq.QueueConfig{Name: name})
	if err != nil {
		return err
	}
	// The queue goes when the example ends, also when it is interrupted, with its schedules and
	// tasks: on a real Redis it would otherwise stay registered, and its schedules active. Its
	// schedulers and worker have stopped by then, and the worker left the queue's consumers.
	defer func() {
		_, derr := srq.DeleteQueue(context.WithoutCancel(ctx), client, name, nil)
		err = errors.Join(err, derr)
	}()
	// Schedule is an upsert: every replica may run it at start; the last one wins, ticks go on.
	if _, err := q.Schedule(ctx, "heartbeat", Job{Kind: "heartbeat"}, &srq.ScheduleOpts{Every: time.Second}); err != nil {
		return err
	}
	nightly, err := q.Schedule(ctx, "nightly-report", Job{Kind: "report"}, &srq.ScheduleOpts{
		Cron: "0 2 * * *", TimeZone: "Europe/Berlin", CatchUp: 1,
		Publish: srq.PublishOpts{Partition: "reports", Ordered: true, MaxAttempts: 5}})
	if err != nil {
		return err
	}
	fmt.Printf("nightly-report next runs at %s\n", nightly.Next.UTC().Format(time.RFC3339))

	// A bad schedule is refused whole, and nothing is stored.
	_, err = q.Schedule(ctx, "broken", Job{}, &srq.ScheduleOpts{Cron: "every night at two"})
	fmt.Println("refused:", err)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The schedulers and the worker run until stopAll; every return waits for them to end.
	runCtx, stopAll := context.WithCancel(ctx)
	var g errgroup.Group
	defer func() {
		stopAll()
		err = errors.Join(err, g.Wait())
	}()
	for range 3 {
		s, err := srq.NewScheduler(client, srq.SchedulerConfig{Queues: []string{name}, Logger: quiet})
		if err != nil {
			return err
		}
		g.Go(func() error { return s.Run(runCtx) })
	}
	var mu sync.Mutex
	runs := map[string]int{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[Job](func(ctx context.Context, t *srq.Task[Job]) error {
		mu.Lock()
		runs[t.ID]++
		mu.Unlock()
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		return err
	}
	g.Go(func() error { return w.Run(runCtx) })

	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := sleep(3 * time.Second); err != nil {
		return err
	}
	// Pausing stops the ticks; resuming goes on at the next one, without the ticks in between.
	if err := q.PauseSchedule(ctx, "heartbeat"); err != nil {
		return err
	}
	if err := sleep(1500 * time.Millisecond); err != nil {
		return err
	}
	if err := q.ResumeSchedule(ctx, "heartbeat"); err != nil {
		return err
	}
	// Run the nightly report now, outside its ticks.
	id, err := q.TriggerSchedule(ctx, "nightly-report")
	if err != nil {
		return err
	}
	fmt.Println("triggered the nightly report:", strings.HasPrefix(id, "sched/nightly-report/now-"))
	if err := sleep(1500 * time.Millisecond); err != nil {
		return err
	}
	list, err := q.Schedules(ctx, "", 10)
	if err != nil {
		return err
	}
	stopAll()
	if err := g.Wait(); err != nil {
		return err
	}

	mu.Lock()
	defer mu.Unlock()
	ticks, twice := 0, 0
	for id, n := range runs {
		if strings.HasPrefix(id, "sched/heartbeat/") {
			ticks++
		}
		if n > 1 {
			twice++
		}
	}
	fmt.Printf("heartbeat ticks run: %d, by 3 schedulers; tasks run more than once: %d\n", ticks, twice)
	for _, s := range list {
		when := "every " + s.Every.String()
		if s.Cron != "" {
			when = s.Cron + " " + s.TimeZone
		}
		fmt.Printf("schedule %-15s %-22s fired %d, missed %d, paused %v\n", s.Name, when, s.Fired, s.Missed, s.Paused)
	}
	for _, s := range list {
		if _, err := q.DeleteSchedule(ctx, s.Name); err != nil {
			return err
		}
	}
	left, err := q.Schedules(ctx, "", 10)
	if err != nil {
		return err
	}
	fmt.Printf("deleted the schedules: %d left\n", len(left))
	if ticks < 3 || twice > 0 {
		return fmt.Errorf("heartbeat ran %d ticks, %d tasks more than once", ticks, twice)
	}
	return nil
}
