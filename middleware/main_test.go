package middleware_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/srqueue/srq/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
