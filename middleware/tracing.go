package middleware

import (
	"context"
	"errors"
	"maps"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/srqueue/srq"
)

// TracingPublish starts a producer span for every publish ("send <queue>") and injects its
// context into every message's headers, so the consumer span continues the trace. A publish made
// inside a handler is a child of the handler's span: workflows show as one trace. It does not
// fail: it returns what the publish returned.
func TracingPublish(cfg OTelConfig) srq.PublishMiddleware {
	tracer, prop := cfg.tracer(), cfg.propagator()
	return func(next srq.PublishFunc) srq.PublishFunc {
		return func(ctx context.Context, p *srq.Publishing) ([]srq.PublishResult, error) {
			attrs := []attribute.KeyValue{attrSystem, keyQueue.String(p.Queue), keyOperation.String("send"),
				keyOperationName.String("send")}
			if len(p.Messages) == 1 {
				attrs = append(attrs, keyPartition.String(string(p.Messages[0].Partition)))
			} else {
				attrs = append(attrs, keyBatchCount.Int(len(p.Messages)))
			}
			ctx, span := tracer.Start(ctx, "send "+p.Queue, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
			defer span.End()
			for i := range p.Messages {
				h := make(map[string]string, len(p.Messages[i].Headers)+2)
				maps.Copy(h, p.Messages[i].Headers) // the caller's map stays untouched
				prop.Inject(ctx, propagation.MapCarrier(h))
				p.Messages[i].Headers = h
			}
			res, err := next(ctx, p)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			} else if len(res) == 1 {
				span.SetAttributes(keyMessageID.String(res[0].ID))
			}
			return res, err
		}
	}
}

// Tracing starts a consumer span for every delivery ("process <queue>"), as a child of the
// producer span whose context the task's headers carry (a flow step's: the step's span of
// TracingFlow). The span has the queue, partition, task id and attempt, a flow step's flow id and
// step name, and the outcome (done, retry, snooze, wait, dead, handed_back, cancelled); failures are recorded (a
// panic with its stack) and set the span's status and error.type. Tracing does not fail: it
// returns the handler's error unchanged.
func Tracing(cfg OTelConfig) srq.Middleware {
	tracer, prop := cfg.tracer(), cfg.propagator()
	return func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(attrSystem, keyQueue.String(d.Queue), keyOperation.String("process"),
					keyOperationName.String("process"), keyPartition.String(string(d.Partition)),
					keyMessageID.String(d.ID), keyAttempt.Int(d.Attempt))}
			if fid := d.FlowID(); fid != "" {
				opts = append(opts, trace.WithAttributes(keyFlowID.String(fid), keyFlowStep.String(d.Step())))
			}
			// The parent is the span context the headers carry, or none: the span the worker was
			// started in (ctx's) is dropped before extracting, so that a task published without
			// trace context starts its own trace rather than joining it.
			ctx = prop.Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), propagation.MapCarrier(d.Headers))
			if !trace.SpanContextFromContext(ctx).IsValid() {
				opts = append(opts, trace.WithNewRoot())
			}
			ctx, span := tracer.Start(ctx, "process "+d.Queue, opts...)
			defer span.End()
			err := next(ctx, d)
			out := outcome(ctx, d, err)
			span.SetAttributes(keyOutcome.String(out))
			if failed(out) {
				var pan *srq.PanicError
				if errors.As(err, &pan) {
					span.RecordError(err, trace.WithAttributes(attribute.String("exception.stacktrace", string(pan.Stack))))
				} else {
					span.RecordError(err)
				}
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(keyErrorType.String(errorType(err)))
			}
			return err
		}
	}
}

// outcome names what the worker will do with a task after err: done, retry, snooze, wait (a
// workflow's wait for its children, a signal or a time), dead, handed_back (cut off by shutdown
// or a lost lease: not a failure of the task), or cancelled (Queue.Cancel while it ran: it ends
// cancelled, not run again, whatever its error; nil acks it).
func outcome(ctx context.Context, d *srq.Delivery, err error) string {
	var rej *srq.RejectError
	var perm *srq.PermanentError
	var wait *srq.WaitError
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		return "done"
	case errors.As(err, &perm):
		return "dead"
	case errors.As(err, &wait):
		return "wait"
	case errors.Is(cause, srq.ErrCancelled):
		return "cancelled"
	case errors.Is(cause, srq.ErrShutdown) || errors.Is(cause, srq.ErrLeaseLost):
		return "handed_back"
	case errors.As(err, &rej) && rej.NotAttempt:
		return "snooze"
	case d.MaxAttempts > 0 && d.Attempt >= d.MaxAttempts:
		return "dead"
	}
	return "retry"
}

// failed says whether outcome out is a failure of the delivery: retry or dead. A snooze and a
// hand-back are not.
func failed(out string) bool { return out == "retry" || out == "dead" }

// errorType is the error.type attribute: the kind of failure srq saw. A panic is "panic"; an
// error that wraps context.DeadlineExceeded is "timeout" before anything that wraps it: Retry,
// outside Timeout, turns a handler cut off by its deadline into srq.RejectWithDelay (or
// srq.Permanent when it gives up), and that is still a timeout.
func errorType(err error) string {
	var pan *srq.PanicError
	var perm *srq.PermanentError
	var rej *srq.RejectError
	switch {
	case errors.As(err, &pan):
		return "panic"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &perm):
		return "permanent"
	case errors.As(err, &rej):
		return "rejected"
	}
	return "_OTHER"
}
