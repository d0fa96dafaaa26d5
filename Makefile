# srq — developer targets. Tests start their own redis-server (or use REDIS_URL).
GO ?= go
# An execution count, not a duration: Go 1.26's fuzzer can fail a target with a bare "context
# deadline exceeded" when a -fuzztime duration ends (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 5000x

.PHONY: test test-race test-embedded bench instr lint quickstart fuzz

test:
	$(GO) test ./...

test-race:
	$(GO) test -race ./...

# The tests on the embedded Redis, as on a machine without redis-server (internal/redistest).
test-embedded:
	SRQ_TEST_BACKEND=embedded $(GO) test -race ./...

# Benchmarks: compare ratios inside one run; state the machine with every figure.
bench:
	$(GO) test ./bench ./engine -run '^$$' -bench . -benchtime 20000x

# Redis instructions per task under valgrind's callgrind: exact where timings drift (needs valgrind).
instr:
	$(GO) run ./bench/cmd/instr

# Short fuzz runs of every fuzz target (every package that has one).
fuzz:
	@for pkg in ./partition ./engine ./codec ./srqtest/history ./lua; do \
	  for f in $$($(GO) test $$pkg -list 'Fuzz.*' | grep ^Fuzz); do \
	    $(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; \
	  done; \
	done

lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

quickstart:
	$(GO) run ./examples/quickstart
