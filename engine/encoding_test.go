package engine

import (
	"fmt"
	"strings"
	"testing"

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
			if !b.server.Real() {
				t.Skip("the embedded Redis has no encodings (OBJECT ENCODING)")
			}
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

// TestLeasesConvert checks that inflight and leases become a skiplist and a hashtable when a fetch
// takes the leased tasks to LEASES_CONVERT (8) or more, and stay listpacks below, where one
// consumer's few leases keep them; that the conversion leaves no member or field behind; and
// that a key converted, emptied and made again starts as a listpack, converted again only when
// it grows.
func TestLeasesConvert(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if !b.server.Real() {
		t.Skip("the embedded Redis has no encodings (OBJECT ENCODING)")
	}
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
	msgs := make([]Message, 30)
	for i := range msgs {
		msgs[i] = Message{Partition: partition.Key(fmt.Sprint(i % 3))}
	}
	b.publish(msgs...)

	first := b.fetch("c", 7)
	want("7 leased", "listpack", "listpack", 7)
	second := b.fetch("c", 1)
	want("8 leased", "skiplist", "hashtable", 8)
	b.ack(second...)
	b.ack(first[1:]...)
	want("1 left leased", "skiplist", "hashtable", 1)
	b.ack(first[0])
	if n, err := b.client.Exists(b.ctx, k.Inflight(), k.Leases()).Result(); err != nil || n != 0 {
		t.Fatalf("inflight and leases outlived the last lease: %d, %v", n, err)
	}
	small := b.fetch("c", 5)
	want("5 leased anew", "listpack", "listpack", 5)
	more := b.fetch("c", 10)
	want("15 leased", "skiplist", "hashtable", 15)
	b.ack(small...)
	b.ack(more...)
	if got := len(b.drain("c")); got != 30-7-1-5-10 {
		t.Errorf("drained %d tasks, want %d", got, 30-7-1-5-10)
	}
}
