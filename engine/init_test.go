package engine

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// TestInitExpandsNoScript: importing the engine does no work on its scripts at the process's start
// (scripts.go, functions.go): every process that imports srq would pay for it, most of a second,
// and a test binary under -race 13 s. The test runs its own binary again with GODEBUG=inittrace=1
// and reads what the package's init allocated: expanding the scripts allocates tens of megabytes.
func TestInitExpandsNoScript(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := regexp.MustCompile(`init github\.com/srqueue/srq/engine @\S+ \S+, \S+ ms clock, (\d+) bytes`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no init trace of the engine package in:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n > 1<<20 {
		t.Errorf("the engine package's init allocated %d bytes: it works on its scripts at start", n)
	}
}
