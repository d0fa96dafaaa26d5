package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/partition"
)

// TestIndexesAreSkiplists checks that the partition indexes a script creates (ready, depth, heads)
// are converted to the skiplist encoding at once, however few partitions they hold (a listpack
// scans the whole set on every update), and that the long member used to convert them is gone.
func TestIndexesAreSkiplists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		msgs        []Message
		rejectFirst bool // fetch everything, then reject it: the reject recreates the indexes
	}{
		{"one task", []Message{{Partition: "a"}}, false},
		{"a task rejected back into an empty queue", []Message{{Partition: "a"}}, true},
		{"a batch over several partitions", []Message{{Partition: "a"}, {Partition: "b"}, {Partition: partition.Ordered("c")}}, false},
		// A partition key as long as the conversion member, of the character a first version used:
		// the conversion must not take it out of the indexes.
		{"a partition like the conversion member", []Message{{Partition: partition.Key(strings.Repeat("~", 200))}, {Partition: "y"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.server.NeedReal(t, "OBJECT ENCODING, which the embedded Redis lacks")
			b.publish(tc.msgs...)
			k := b.eng.Keys()
			if tc.rejectFirst {
				var rs []Rejection
				for _, d := range b.fetch("c", len(tc.msgs)) {
					rs = append(rs, Rejection{Receipt: d.Receipt(), NotAttempt: true})
				}
				if n, err := b.client.Exists(b.ctx, k.Depth(), k.Heads()).Result(); err != nil || n != 0 {
					t.Fatalf("the indexes outlived the last pending task: %d, %v", n, err)
				}
				if _, err := b.eng.Reject(b.ctx, rs); err != nil {
					t.Fatal(err)
				}
			}
			for _, key := range []string{k.Ready(), k.Depth(), k.Heads()} {
				enc, err := b.client.ObjectEncoding(b.ctx, key).Result()
				if err != nil || enc != "skiplist" {
					t.Errorf("%s: encoding %q, %v; want skiplist", key, enc, err)
				}
				members, err := b.client.ZRange(b.ctx, key, 0, -1).Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range members {
					if m == strings.Repeat("\xff", 200) {
						t.Errorf("%s keeps the conversion member", key)
					}
				}
				if len(members) != len(tc.msgs) {
					t.Errorf("%s holds %d members, want %d", key, len(members), len(tc.msgs))
				}
			}
			if got := b.drain("c"); len(got) != len(tc.msgs) {
				t.Errorf("drained %d tasks, want %d", len(got), len(tc.msgs))
			}
		})
	}
}

// TestLeasesConvert checks that a fetch converts inflight and leases to a skiplist and a
// hashtable when they held leases before it and hold LEASES_CONVERT (8) or more after it, also
// when an ack in the same call (AckFetch) took some out first and after a restore (what a restart
// does) made them listpacks again; that keys a fetch makes stay listpacks, so a consumer whose leases all end
// before its next fetch does not convert them on every call; and that the conversion leaves no
// member or field behind.
func TestLeasesConvert(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.server.NeedReal(t, "OBJECT ENCODING, which the embedded Redis lacks")
	k := b.eng.Keys()
	want := func(step, zset, hash string, leased int) {
		t.Helper()
		if enc, err := b.client.ObjectEncoding(b.ctx, k.Inflight()).Result(); err != nil || enc != zset {
			t.Errorf("%s: inflight is %q, %v; want %s", step, enc, err, zset)
		}
		if enc, err := b.client.ObjectEncoding(b.ctx, k.Leases()).Result(); err != nil || enc != hash {
			t.Errorf("%s: leases is %q, %v; want %s", step, enc, err, hash)
		}
		ids, err := b.client.ZRange(b.ctx, k.Inflight(), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		fields, err := b.client.HKeys(b.ctx, k.Leases()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != leased || len(fields) != leased {
			t.Errorf("%s: %d in inflight and %d leases, want %d of each", step, len(ids), len(fields), leased)
		}
	}
	msgs := make([]Message, 60)
	for i := range msgs {
		msgs[i] = Message{Partition: partition.Key(fmt.Sprint(i % 3))}
	}
	b.publish(msgs...)
	var leased []Delivery

	leased = append(leased, b.fetch("c", 7)...)
	want("7 leased", "listpack", "listpack", 7)
	leased = append(leased, b.fetch("c", 1)...)
	want("8 leased", "skiplist", "hashtable", 8)
	b.ack(leased...)
	if n, err := b.client.Exists(b.ctx, k.Inflight(), k.Leases()).Result(); err != nil || n != 0 {
		t.Fatalf("inflight and leases outlived the last lease: %d, %v", n, err)
	}

	leased = b.fetch("c", 10)
	want("10 leased by the fetch that made the keys", "listpack", "listpack", 10)
	acks := make([]Receipt, 3)
	for i, d := range leased[:3] {
		acks[i] = d.Receipt()
	}
	errs, ds, _, err := b.eng.AckFetch(b.ctx, acks, "c", 1, time.Minute)
	if err != nil || len(ds) != 1 || errors.Join(errs...) != nil {
		t.Fatalf("AckFetch: %v, %d tasks, %v", errs, len(ds), err)
	}
	leased = append(leased[3:], ds...)
	want("7 left and 1 more in one call", "skiplist", "hashtable", 8)

	b.reload(k.Inflight(), k.Leases())
	want("8 leased, reloaded", "listpack", "listpack", 8)
	leased = append(leased, b.fetch("c", 1)...)
	want("9 leased after the reload", "skiplist", "hashtable", 9)
	b.ack(leased...)
	if got := len(b.drain("c")); got != 60-20 {
		t.Errorf("drained %d tasks, want %d (60 published, 20 fetched before)", got, 60-20)
	}
}

// TestRecoverReencodes checks that recovery converts back what a restart made listpacks again:
// the partition indexes whatever their size, and inflight and leases from LEASES_CONVERT leases
// on; that it changes no member or score; and that fewer leases stay a listpack.
func TestRecoverReencodes(t *testing.T) {
	t.Parallel()
	for _, leased := range []int{3, 10} {
		t.Run(fmt.Sprintf("%d leased", leased), func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{})
			b.server.NeedReal(t, "OBJECT ENCODING, which the embedded Redis lacks")
			k := b.eng.Keys()
			msgs := make([]Message, 20)
			for i := range msgs {
				msgs[i] = Message{Partition: partition.Key(fmt.Sprint(i % 4))}
			}
			b.publish(msgs...)
			ds := b.fetch("c", leased)
			zsets := []string{k.Ready(), k.Depth(), k.Heads(), k.Inflight()}
			before := map[string][]redis.Z{}
			b.reload(append(zsets, k.Leases())...)
			for _, key := range append(zsets, k.Leases()) {
				if enc := b.client.ObjectEncoding(b.ctx, key).Val(); enc != "listpack" {
					t.Fatalf("%s reloaded as %q, want listpack", key, enc)
				}
			}
			for _, key := range zsets {
				before[key] = b.client.ZRangeWithScores(b.ctx, key, 0, -1).Val()
			}
			leases := b.client.HGetAll(b.ctx, k.Leases()).Val()

			if _, err := b.eng.Recover(b.ctx); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{k.Ready(): "skiplist", k.Depth(): "skiplist", k.Heads(): "skiplist",
				k.Inflight(): "listpack", k.Leases(): "listpack"}
			if leased >= 8 {
				want[k.Inflight()], want[k.Leases()] = "skiplist", "hashtable"
			}
			for key, enc := range want {
				if got := b.client.ObjectEncoding(b.ctx, key).Val(); got != enc {
					t.Errorf("%s is %q after recovery, want %s", key, got, enc)
				}
			}
			for _, key := range zsets {
				if after := b.client.ZRangeWithScores(b.ctx, key, 0, -1).Val(); !slices.Equal(after, before[key]) {
					t.Errorf("%s changed: %v, was %v", key, after, before[key])
				}
			}
			if after := b.client.HGetAll(b.ctx, k.Leases()).Val(); !maps.Equal(after, leases) {
				t.Errorf("leases changed: %v, was %v", after, leases)
			}
			b.ack(ds...)
			if got := len(b.drain("c")); got != 20-leased {
				t.Errorf("drained %d tasks, want %d", got, 20-leased)
			}
		})
	}
}

// reload does to keys what a restart does: Redis loads them anew (DUMP, then RESTORE), and gives
// every small set and hash the listpack encoding again, whatever it was converted to.
func (b *bundle) reload(keys ...string) {
	b.t.Helper()
	for _, key := range keys {
		dump, err := b.client.Dump(b.ctx, key).Result()
		if err != nil {
			b.t.Fatal(err)
		}
		if err := b.client.RestoreReplace(b.ctx, key, 0, dump).Err(); err != nil {
			b.t.Fatal(err)
		}
	}
}
