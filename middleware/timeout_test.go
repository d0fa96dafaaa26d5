package middleware_test

import (
	"context"
	"errors"
	"fmt"
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

// TestTimeoutNotPositiveIsNoDeadline: Timeout(0) and Timeout(-1s) run the handler with the
// context it got, with no deadline (they used to end it at once, failing every task).
func TestTimeoutNotPositiveIsNoDeadline(t *testing.T) {
	t.Parallel()
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "parent")
	for _, d := range []time.Duration{0, -time.Second} {
		ran := false
		err := middleware.Timeout(d)(func(ctx context.Context, _ *srq.Delivery) error {
			ran = true
			if ctx != parent {
				return errors.New("the handler got a context other than its parent")
			}
			if dl, ok := ctx.Deadline(); ok {
				return fmt.Errorf("deadline %v", dl)
			}
			return ctx.Err()
		})(parent, &srq.Delivery{})
		if !ran || err != nil {
			t.Errorf("Timeout(%v): ran %v, err %v", d, ran, err)
		}
	}
}
