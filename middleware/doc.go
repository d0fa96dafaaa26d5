// Package middleware wraps srq handlers, once for every payload type: each middleware sees the
// task's *srq.Delivery and the error the handler returned, and may turn that error into the
// worker's control-flow errors (srq.RejectWithDelay, srq.Snooze, srq.Permanent).
//
// A worker applies WorkerConfig.Middleware first outermost. The recommended order, outermost
// first, is
//
//	Tracing → Metrics → Logging → RateLimit → Retry → Timeout → handler
//
// so that the trace and the metrics cover everything the task went through, the log line shows
// the decision Retry made, a rate-limited task never reaches the handler or counts an attempt,
// and Timeout bounds only the handler's own work. Handler panics are recovered by the worker
// before any middleware sees them, as *srq.PanicError.
//
// The producer side has TracingPublish and MetricsPublish for srq.QueueConfig.PublishMiddleware,
// and TracingFlow for srq.Flow.Middleware, which makes a flow and every step's handler one trace.
package middleware
