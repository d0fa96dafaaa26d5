package middleware_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/middleware"
)

func TestTimeout(t *testing.T) {
	t.Parallel()
	mw := middleware.Timeout(20 * time.Millisecond)
	err := mw(func(ctx context.Context, _ *srq.Delivery) error {
		<-ctx.Done()
		return ctx.Err()
	})(context.Background(), &srq.Delivery{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	// A parent that ends first (a lost lease) ends the handler first.
	parent, cancel := context.WithCancelCause(context.Background())
	cancel(srq.ErrLeaseLost)
	err = middleware.Timeout(time.Hour)(func(ctx context.Context, _ *srq.Delivery) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})(parent, &srq.Delivery{})
	if !errors.Is(err, srq.ErrLeaseLost) {
		t.Fatalf("%v", err)
	}
}
