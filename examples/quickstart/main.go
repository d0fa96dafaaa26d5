// Command quickstart shows srq's engine end to end: per-user ordered events and plain jobs, one
// shared pool of workers, a retry and a dead letter. It runs on an embedded Redis unless REDIS_URL
// names a real one, and ends by itself with a summary.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, where, stop, err := connect()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	fmt.Println("redis:", where)
	if err := run(ctx, client); err != nil {
		log.Fatal(err)
	}
}

// connect returns a client of REDIS_URL, or of an embedded Redis started here.
func connect() (redis.UniversalClient, string, func(), error) {
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		c := redis.NewClient(opt)
		return c, url, func() { _ = c.Close() }, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, err
	}
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return c, "embedded (set REDIS_URL to use a real server)", func() { _ = c.Close(); m.Close() }, nil
}

func run(ctx context.Context, client redis.UniversalClient) error {
	queue := fmt.Sprintf("quickstart-%d", time.Now().UnixNano())
	eng, err := engine.New(client, engine.Config{Queue: queue})
	if err != nil {
		return err
	}

	// Three users' events, each user an ordered partition; a few plain jobs in the base partition.
	var msgs []engine.Message
	for i := 1; i <= 4; i++ {
		for _, user := range []string{"alice", "bob", "carol"} {
			msgs = append(msgs, engine.Message{
				ID:          fmt.Sprintf("%s-event-%d", user, i),
				Partition:   partition.Ordered(user),
				Payload:     []byte(fmt.Sprintf("%s #%d", user, i)),
				MaxAttempts: 3,
			})
		}
	}
	for i := 1; i <= 3; i++ {
		msgs = append(msgs, engine.Message{ID: fmt.Sprintf("job-%d", i), Payload: []byte(fmt.Sprintf("job %d", i))})
	}
	msgs = append(msgs, engine.Message{ID: "poison", Payload: []byte("always fails"), MaxAttempts: 2})
	if _, err := eng.Publish(ctx, msgs); err != nil {
		return err
	}
	fmt.Printf("published %d tasks\n", len(msgs))

	var (
		mu       sync.Mutex
		seen     = map[string][]string{}
		retried  bool
		finished int
	)
	// handle is the business logic: bob's second event fails once (a retry), "poison" always fails.
	handle := func(d engine.Delivery) error {
		switch {
		case d.ID == "bob-event-2" && d.Attempt == 1:
			retried = true
			return errors.New("downstream timeout")
		case d.ID == "poison":
			return errors.New("cannot parse payload")
		}
		seen[d.Partition.Name()] = append(seen[d.Partition.Name()], string(d.Payload))
		return nil
	}

	// Four workers share one pool: each fetches a few tasks, handles them in order and settles them.
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			consumer := fmt.Sprintf("worker-%d", w)
			for work.Err() == nil {
				ds, err := eng.FetchWait(work, consumer, 3, 10*time.Second, 200*time.Millisecond)
				if err != nil {
					return
				}
				handedBack := map[partition.Key]bool{}
				for _, d := range ds {
					if handedBack[d.Partition] {
						continue // went back with an earlier failed task of its ordered partition
					}
					mu.Lock()
					herr := handle(d)
					mu.Unlock()
					if herr == nil {
						if _, err := eng.Ack(work, []engine.Receipt{d.Receipt()}); err != nil {
							return
						}
						continue
					}
					// A failed ordered task goes back, and the engine takes back the later tasks of its
					// partition fetched with it, so none of them overtakes it.
					back := []engine.Rejection{{Receipt: d.Receipt(), Delay: 50 * time.Millisecond, Reason: herr.Error()}}
					if _, err := eng.Reject(work, back); err != nil {
						return
					}
					handedBack[d.Partition] = d.Partition.IsOrdered()
				}
			}
		}()
	}

	// Wait until everything is settled: nothing pending or leased.
	for {
		st, err := eng.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Pending == 0 && st.InFlight == 0 {
			finished = int(st.Acked)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	stopWork()
	wg.Wait()

	users := make([]string, 0, len(seen))
	for u := range seen {
		users = append(users, u)
	}
	sort.Strings(users)
	fmt.Println("order per user (kept, even with bob's retry):")
	for _, u := range users {
		if u == "" {
			fmt.Printf("  plain jobs: %s\n", strings.Join(seen[u], ", "))
			continue
		}
		fmt.Printf("  %s: %s\n", u, strings.Join(seen[u], ", "))
	}
	fmt.Println("retried bob #2 after a failure:", retried)
	page, err := eng.DeadLetters(ctx, 0, 10)
	if err != nil {
		return err
	}
	for _, d := range page.Letters {
		fmt.Printf("dead letter: %s after %d attempts: %s\n", d.ID, d.Attempts, d.LastError)
	}
	fmt.Printf("summary: %d acked, %d dead-lettered\n", finished, page.Total)

	// Leave nothing behind on a real server: purge the dead letter and the queue's counters.
	if _, err := eng.PurgeAll(ctx); err != nil {
		return err
	}
	k := eng.Keys()
	return client.Del(ctx, k.Stats(), k.Seq(), k.Wake(), k.Dedup()).Err()
}
