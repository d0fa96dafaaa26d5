package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/srqueue/srq"
)

type node struct {
	Parent bool
	I      int
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:7392"})
	q, err := srq.NewQueue[node](c, srq.QueueConfig{Name: "wf"})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	h := srq.HandlerFunc[node](func(ctx context.Context, t *srq.Task[node]) error {
		if !t.Value.Parent {
			return nil
		}
		{
			kids, _ := t.Children(ctx)
			if len(kids) == 0 {
				var sp []srq.Spawned[node]
				for i := 0; i < 3; i++ {
					sp = append(sp, srq.Spawned[node]{Name: fmt.Sprint("c", i), Value: node{I: i}})
				}
				if _, err := srq.SpawnBatch(ctx, t.Delivery, q, sp); err != nil {
					panic(err)
				}
				fmt.Println("=== SPAWNED")
				return srq.WaitChildren()
			}
		}
		close(done)
		return nil
	})
	w, _ := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rctx, stop := context.WithCancel(ctx)
	go w.Run(rctx)
	if _, err := q.Publish(ctx, node{Parent: true}, nil); err != nil {
		panic(err)
	}
	<-done
	stop()
	time.Sleep(200 * time.Millisecond)
}
