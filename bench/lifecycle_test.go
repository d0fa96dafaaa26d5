package bench

// What results, events and flows cost on the hot path: one task at a time published, fetched and
// acked, with results and the event stream off and on, and a step of a chain flow beside a plain
// task, in one run each, so their Redis figures compare as ratios.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// cycleOne publishes one task on e, fetches it and acks it (with result, when not nil).
func cycleOne(b *testing.B, e *engine.Engine, p partition.Key, result []byte) {
	ctx := context.Background()
	if _, err := e.Publish(ctx, []engine.Message{{Partition: p, Payload: payload20}}); err != nil {
		b.Fatal(err)
	}
	ds, err := e.Fetch(ctx, "bench", 1, time.Minute)
	if err != nil || len(ds) != 1 {
		b.Fatalf("fetch: %d tasks, %v", len(ds), err)
	}
	r := ds[0].Receipt()
	r.Result = result
	if errs, err := e.Ack(ctx, []engine.Receipt{r}); err != nil || errs[0] != nil {
		b.Fatalf("ack: %v %v", errs, err)
	}
}

// BenchmarkLifecycleCost publishes, fetches and acks one task at a time over 100 partitions: plain,
// with a 20-byte result kept for an hour (Config.ResultRetention), with an event stream
// (Config.Events), and with both. Compare the redis-cpu-µs/task of the four.
func BenchmarkLifecycleCost(b *testing.B) {
	cases := []struct {
		name   string
		cfg    engine.Config
		result []byte
	}{
		{"plain", engine.Config{}, nil},
		{"results", engine.Config{ResultRetention: time.Hour}, payload20},
		{"events", engine.Config{Events: 10_000}, nil},
		{"results+events", engine.Config{ResultRetention: time.Hour, Events: 10_000}, payload20},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e := newEngineWith(b, c.cfg)
			cost := startCost(b, e.Client())
			b.ResetTimer()
			for i := range b.N {
				cycleOne(b, e, partition.Key(fmt.Sprint(i%100)), c.result)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
			cost.report(b, e.Client(), b.N)
		})
	}
}

// chainLen is the length of the chains BenchmarkFlowStep runs.
const chainLen = 10

// BenchmarkFlowStep compares a step of a chain flow with a plain task: "plain-task" publishes,
// fetches and acks one task at a time; "chain-step" publishes chains of 10 steps (one PublishFlow
// each) and runs each step by a fetch of one and an ack of one carrying a 20-byte result, which
// releases the next step in the same call. Per task (step), the publish of the chain counts a tenth.
func BenchmarkFlowStep(b *testing.B) {
	b.Run("plain-task", func(b *testing.B) {
		e := newEngine(b)
		cost := startCost(b, e.Client())
		b.ResetTimer()
		for i := range b.N {
			cycleOne(b, e, partition.Key(fmt.Sprint(i%100)), nil)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		cost.report(b, e.Client(), b.N)
	})
	b.Run("chain-step", func(b *testing.B) {
		e := newEngine(b)
		ctx := context.Background()
		flows := (b.N + chainLen - 1) / chainLen
		cost := startCost(b, e.Client())
		b.ResetTimer()
		for f := range flows {
			steps := make([]engine.FlowStep, chainLen)
			for s := range steps {
				steps[s] = engine.FlowStep{Name: fmt.Sprint("s", s), Engine: e,
					Message: engine.Message{Partition: partition.Key(fmt.Sprint(f % 100)), Payload: payload20}}
				if s > 0 {
					steps[s].After = []engine.FlowEdge{{Parent: steps[s-1].Name}}
				}
			}
			if _, err := engine.PublishFlow(ctx, &engine.FlowSpec{Steps: steps}); err != nil {
				b.Fatal(err)
			}
			for range chainLen {
				ds, err := e.Fetch(ctx, "bench", 1, time.Minute)
				if err != nil || len(ds) != 1 {
					b.Fatalf("fetch: %d tasks, %v", len(ds), err)
				}
				r := ds[0].Receipt()
				r.Result = payload20
				if errs, err := e.Ack(ctx, []engine.Receipt{r}); err != nil || errs[0] != nil {
					b.Fatalf("ack: %v %v", errs, err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(flows*chainLen)/b.Elapsed().Seconds(), "tasks/s")
		cost.report(b, e.Client(), flows*chainLen)
	})
}

// BenchmarkFlowFanIn runs one flow of 10,000 parallel steps and a join that waits for all of
// them, per iteration: the publish (written in parts), the steps fetched and acked 1,000 at a time,
// the relay of the signals past an ack's budget, and the join. ns/op is the whole flow.
func BenchmarkFlowFanIn(b *testing.B) {
	const n = 10_000
	e := newEngine(b)
	ctx := context.Background()
	cost := startCost(b, e.Client())
	b.ResetTimer()
	for range b.N {
		steps := make([]engine.FlowStep, 0, n+1)
		join := engine.FlowStep{Name: "join", Engine: e, Message: engine.Message{Payload: []byte("join")}}
		for i := range n {
			name := fmt.Sprint("s", i)
			steps = append(steps, engine.FlowStep{Name: name, Engine: e,
				Message: engine.Message{Partition: partition.Key(fmt.Sprint(i % 100)), Payload: payload20}})
			join.After = append(join.After, engine.FlowEdge{Parent: name})
		}
		if _, err := engine.PublishFlow(ctx, &engine.FlowSpec{Steps: append(steps, join)}); err != nil {
			b.Fatal(err)
		}
		for ran, joined := 0, false; !joined; {
			ds, err := e.Fetch(ctx, "bench", 1000, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if len(ds) == 0 {
				// Signals past an ack's budget wait in the outbox for a relay, as a worker runs it.
				if moved, err := e.Relay(ctx); err != nil || moved == 0 {
					b.Fatalf("no task ready after %d steps, relay moved %d: %v", ran, moved, err)
				}
				continue
			}
			rs := make([]engine.Receipt, len(ds))
			for i, d := range ds {
				if string(d.Payload) == "join" {
					if ran != n {
						b.Fatalf("join ran after %d of its parents", ran)
					}
					joined = true
				}
				rs[i] = d.Receipt()
			}
			if _, err := e.Ack(ctx, rs); err != nil {
				b.Fatal(err)
			}
			ran += len(ds)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*(n+1))/b.Elapsed().Seconds(), "tasks/s")
	cost.report(b, e.Client(), b.N*(n+1))
}
