package main

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/srqueue/srq/devredis"
)

// TestRun: the example's checkout, its order and e-mail tasks and its flow make 14 spans in one
// trace, with no propagator configured, and the flow's last step links to the two it waits for.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, stop, err := devredis.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	spans, err := run(ctx, client, tracetest.NewNoopExporter())
	if err != nil {
		t.Fatal(err)
	}
	traces := map[string]bool{}
	links := map[string]int{}
	for _, s := range spans {
		traces[s.SpanContext().TraceID().String()] = true
		links[s.Name()] += len(s.Links())
	}
	if len(spans) != 14 || len(traces) != 1 {
		t.Errorf("%d spans in %d traces, want 14 in 1", len(spans), len(traces))
	}
	if links["step ship"] != 2 || links["step invoice"] != 1 || links["step charge"] != 0 {
		t.Errorf("links %v", links)
	}
}
