// Package bench holds srq's benchmarks. They start their own redis-server (or use REDIS_URL):
//
//	go test ./bench -run '^$' -bench . -benchtime 20000x
//
// Benchmarks on a shared or small machine are noisy: compare ratios inside one run, and state the
// machine with every figure.
package bench
