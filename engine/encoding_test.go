package engine

import (
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
