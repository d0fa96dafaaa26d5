package pool

import (
	"testing"

	"github.com/srqueue/srq/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
