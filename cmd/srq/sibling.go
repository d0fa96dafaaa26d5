package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/srqueue/srq/partition"
)

// sibling returns the partition whose key differs from p only by the leading "!" that makes a
// partition ordered: "!u3" for "u3" and "u3" for "!u3"; "" when there is none (the base partition,
// and "!" whose other spelling is the base partition).
func sibling(p partition.Key) partition.Key {
	s := string(p)
	switch {
	case s == "" || s == "!":
		return ""
	case strings.HasPrefix(s, "!"):
		return partition.Key(s[1:])
	}
	return partition.Key("!" + s)
}

// warnSibling says on stderr, after a pause or a resume of partition p, when p has no pending task
// (nor a leased one that holds it) and the partition spelled with or without the leading "!" has: a common
// slip, since "u3" and "!u3" are two partitions (the first unordered, the second ordered). The
// pause or resume stands: a partition without tasks may be paused ahead of them. It reads both
// partitions' entries in the depth index and their held sets, O(1) each; a failed read says
// nothing.
func (c *cli) warnSibling(p partition.Key, verb string) {
	other := sibling(p)
	if other == "" {
		return
	}
	mine, err := c.in.Partition(c.ctx, c.opts.queue, p)
	if err != nil || mine.Pending > 0 || mine.Leased > 0 {
		return
	}
	theirs, err := c.in.Partition(c.ctx, c.opts.queue, other)
	if err != nil || theirs.Pending+theirs.Leased == 0 {
		return
	}
	kind := "unordered"
	if other.IsOrdered() {
		kind = "ordered"
	}
	fmt.Fprintf(c.stderr, "srq: note: partition %s has no pending task; the %s partition %s has %d pending and %d leased: "+
		"to %s it, run again with --partition %s\n", quoteKey(p), kind, quoteKey(other), theirs.Pending, theirs.Leased,
		verb, shellWord(string(other)))
}

// quoteKey shows a partition key in a message: quoted, with control characters escaped.
func quoteKey(p partition.Key) string { return escapeText(strconv.Quote(string(p))) }
