package srq_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
)

type Report struct{ Kind string }

// Schedule a task every second, and let Schedulers publish its ticks: run one in every replica of
// a service, or in a process of its own. Each tick is published once, whatever the number of
// schedulers.
func ExampleQueue_Schedule() {
	client, done := devredis.MustEmbedded()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	q, err := srq.NewQueue[Report](client, srq.QueueConfig{Name: "reports"})
	if err != nil {
		panic(err)
	}
	// An upsert: running it again with other options updates the schedule.
	if _, err := q.Schedule(ctx, "heartbeat", Report{Kind: "heartbeat"}, &srq.ScheduleOpts{Every: time.Second}); err != nil {
		panic(err)
	}
	// A daily report at 07:30 in Berlin, catching up at most one missed day after an outage.
	if _, err := q.Schedule(ctx, "daily", Report{Kind: "daily"}, &srq.ScheduleOpts{
		Cron: "30 7 * * *", TimeZone: "Europe/Berlin", CatchUp: 1}); err != nil {
		panic(err)
	}

	// Two schedulers, as two replicas would run them.
	got := make(chan string, 10)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 3) // what each scheduler's and the worker's Run returns
	for range 2 {
		s, err := srq.NewScheduler(client, srq.SchedulerConfig{Queues: []string{"reports"}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			panic(err)
		}
		go func() { ran <- s.Run(runCtx) }()
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[Report](func(ctx context.Context, t *srq.Task[Report]) error {
		got <- t.Value.Kind + " " + t.ID[:strings.LastIndexByte(t.ID, '/')]
		return nil
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	go func() { ran <- w.Run(runCtx) }()
	fmt.Println(<-got)
	stop()
	for range 3 {
		if err := <-ran; err != nil {
			panic(err)
		}
	}

	list, err := q.Schedules(ctx, "", 10)
	if err != nil {
		panic(err)
	}
	for _, in := range list {
		fmt.Printf("%s: cron %q every %v paused %v\n", in.Name, in.Cron, in.Every, in.Paused)
	}

	// Done with the queue: delete it (Force: this example's worker fetched from it just now).
	if _, err := srq.DeleteQueue(ctx, client, q.Name(), &srq.DeleteQueueOpts{Force: true}); err != nil {
		panic(err)
	}
	// Output:
	// heartbeat sched/heartbeat
	// daily: cron "30 7 * * *" every 0s paused false
	// heartbeat: cron "" every 1s paused false
}
