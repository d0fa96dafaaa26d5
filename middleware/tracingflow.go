package middleware

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// TracingFlow returns flow middleware (srq.Flow.Middleware) that makes a flow one trace. Its
// publish starts a producer span "publish flow", carrying the flow's id (srq.flow.id: generated
// here, as PublishFlow would, when the Flow has none; the caller's Flow is not changed), and for
// every step a producer span "step <name>", a child of the flow span with a link to the span of
// every step it depends on (srq.flow.step on the link names the parent), so a tracing UI shows
// the DAG. Each step's span context is injected into its task's headers (srq.Step.SetHeader), so
// that the step's consumer span of Tracing, whenever the step runs, is a child of its step span.
// When the publish fails the spans record the error; a duplicate flow sets srq.duplicate on the
// flow span. TracingFlow does not fail: it returns what the publish returned.
func TracingFlow(cfg OTelConfig) srq.FlowMiddleware {
	tracer, prop := cfg.tracer(), cfg.propagator()
	return func(next srq.FlowPublishFunc) srq.FlowPublishFunc {
		return func(ctx context.Context, f *srq.Flow) (srq.FlowResult, error) {
			if f == nil {
				return next(ctx, f) // PublishFlow's own check reports it
			}
			g := *f
			if g.ID == "" {
				g.ID = engine.NewID()
			}
			ctx, flowSpan := tracer.Start(ctx, "publish flow", trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(attrSystem, keyOperation.String("send"), keyOperationName.String("publish_flow"),
					keyFlowID.String(g.ID), keyBatchCount.Int(len(g.Steps))))
			steps := topological(g.Steps)
			spans := make([]trace.Span, 0, len(steps))
			started := make(map[*srq.Step]trace.SpanContext, len(steps))
			for _, s := range steps {
				var links []trace.Link
				for _, p := range s.Parents() {
					if sc, ok := started[p]; ok {
						links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{keyFlowStep.String(p.Name())}})
					}
				}
				stepCtx, span := tracer.Start(ctx, "step "+s.Name(), trace.WithSpanKind(trace.SpanKindProducer), trace.WithLinks(links...),
					trace.WithAttributes(attrSystem, keyQueue.String(s.Queue()), keyPartition.String(string(s.Partition())), keyOperation.String("send"),
						keyOperationName.String("send"), keyMessageID.String(engine.StepID(g.ID, s.Name())),
						keyFlowID.String(g.ID), keyFlowStep.String(s.Name())))
				started[s] = span.SpanContext()
				spans = append(spans, span)
				h := propagation.MapCarrier{}
				prop.Inject(stepCtx, h)
				for k, v := range h {
					s.SetHeader(k, v)
				}
			}
			res, err := next(ctx, &g)
			if err != nil {
				flowSpan.RecordError(err)
				flowSpan.SetStatus(codes.Error, err.Error())
			}
			if res.Duplicate {
				flowSpan.SetAttributes(keyDuplicate.Bool(true))
			}
			for _, span := range spans {
				if err != nil {
					span.SetStatus(codes.Error, err.Error())
				}
				span.End()
			}
			flowSpan.End()
			return res, err
		}
	}
}

// topological returns the non-nil steps of a flow with every step after the steps it depends on
// (Kahn's algorithm). Dependencies on steps outside the flow are left out,
// and steps on a cycle come last, in the flow's order: PublishFlow refuses such a flow anyway.
func topological(steps []*srq.Step) []*srq.Step {
	in := make(map[*srq.Step]bool, len(steps))
	for _, s := range steps {
		if s != nil {
			in[s] = true
		}
	}
	waiting := make(map[*srq.Step]int, len(steps))          // parents not yet ordered
	children := make(map[*srq.Step][]*srq.Step, len(steps)) // steps depending on each
	var queue []*srq.Step
	for _, s := range steps {
		if s == nil || waiting[s] > 0 {
			continue
		}
		n := 0
		for _, p := range s.Parents() {
			if in[p] {
				n++
				children[p] = append(children[p], s)
			}
		}
		if n == 0 {
			queue = append(queue, s)
		}
		waiting[s] = n
	}
	out := make([]*srq.Step, 0, len(in))
	done := make(map[*srq.Step]bool, len(in))
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if done[s] {
			continue
		}
		done[s] = true
		out = append(out, s)
		for _, c := range children[s] {
			if waiting[c]--; waiting[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	for _, s := range steps {
		if s != nil && !done[s] {
			done[s] = true
			out = append(out, s)
		}
	}
	return out
}
