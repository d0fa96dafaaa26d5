package srqtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/srqtest"
)

// Unit-test a handler's decisions without running a worker: Process runs one task through it and
// reports what the worker would do with the task.
func ExampleProcess() {
	asTest(func(t testing.TB) { // func TestCharge(t *testing.T) in your code
		charge := srq.HandlerFunc[int](func(_ context.Context, task *srq.Task[int]) error {
			switch {
			case task.Value <= 0:
				return srq.Permanent(fmt.Errorf("invalid amount %d", task.Value)) // retrying cannot fix it
			case task.Value > 10_000:
				return errors.New("bank timeout")
			}
			return nil
		})
		cfg := srq.WorkerConfig{Logger: quiet}

		ok := srqtest.Process(t, charge, 500, nil, srq.QueueConfig{}, cfg)
		fmt.Println("500: acked", ok.Acked)

		retried := srqtest.Process(t, charge, 20_000, nil, srq.QueueConfig{}, cfg)
		fmt.Println("20000: retried", retried.Retried, "after attempt", retried.Attempts, "-", retried.LastError)

		dead := srqtest.Process(t, charge, -5, nil, srq.QueueConfig{}, cfg)
		fmt.Println("-5: dead-lettered", dead.DeadLettered, "-", dead.LastError)
	})
	// Output:
	// 500: acked true
	// 20000: retried true after attempt 1 - bank timeout
	// -5: dead-lettered true - invalid amount -5
}

// A test that needs real queues and workers gets a Redis of its own from NewRedis, closed when the
// test ends. When REDIS_URL names a shared server, each test must use queue names (or a key prefix)
// of its own.
func ExampleNewRedis() {
	asTest(func(t testing.TB) { // func TestSignup(t *testing.T) in your code
		ctx := context.Background()

		client := srqtest.NewRedis(t)
		// A key prefix of the test's own, removed at its end: a shared server keeps nothing of it.
		prefix := fmt.Sprintf("test-%d", time.Now().UnixNano())
		t.Cleanup(func() {
			if keys, _ := client.Keys(context.WithoutCancel(ctx), prefix+":*").Result(); len(keys) > 0 {
				client.Del(context.WithoutCancel(ctx), keys...)
			}
		})
		q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "emails", Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Publish(ctx, "welcome", nil); err != nil {
			t.Fatal(err)
		}
		w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, task *srq.Task[string]) error {
			fmt.Println("sent", task.Value)
			return nil
		}), srq.WorkerConfig{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("acked:", st.Acked)
	})
	// Output:
	// sent welcome
	// acked: 1
}

// asTest runs test with a stand-in for the *testing.T an example does not get: it has the methods
// srqtest and these examples call, panics where a test would fail, and runs the cleanups at the end.
func asTest(test func(t testing.TB)) {
	t := &exampleT{}
	defer func() {
		for _, f := range slices.Backward(t.cleanups) {
			f()
		}
	}()
	test(t)
}

type exampleT struct {
	testing.TB
	cleanups []func()
}

func (*exampleT) Helper()                      {}
func (*exampleT) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (*exampleT) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (t *exampleT) Cleanup(f func())           { t.cleanups = append(t.cleanups, f) }
