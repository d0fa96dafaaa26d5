// Package partition defines partition keys: which tasks must run in order and which may run in
// parallel.
//
// A key that starts with "!" names an ordered partition: at most one consumer holds it at a time
// and its tasks run one after another. Any other key names an unordered partition, whose tasks run
// in parallel. The empty key is the base partition, which is unordered.
package partition

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxLen is the longest partition key, in bytes.
const MaxLen = 512

// OrderedPrefix starts the key of every ordered partition.
const OrderedPrefix = "!"

// Key names a partition. The zero value is the base partition.
type Key string

// Base is the base partition: unordered, used when a task names no partition.
const Base Key = ""

// ErrInvalid is wrapped by every error Validate returns.
var ErrInvalid = errors.New("invalid partition key")

// Ordered returns the key of the ordered partition called name, such as a user or account id.
// It fails Validate when name is empty.
func Ordered(name string) Key { return Key(OrderedPrefix + name) }

// IsOrdered reports whether k names an ordered partition.
func (k Key) IsOrdered() bool { return len(k) > 0 && k[0] == OrderedPrefix[0] }

// Name returns k without the ordered prefix.
func (k Key) Name() string {
	if k.IsOrdered() {
		return string(k[1:])
	}
	return string(k)
}

// String returns k as it is stored.
func (k Key) String() string { return string(k) }

// Validate reports whether k can be used: at most MaxLen bytes of valid UTF-8, and an ordered key
// must name something (a bare "!" is refused). Any other byte, including ':', '{', '}', '*' and
// spaces, is allowed: keys never collide with one another or with task ids in Redis.
func (k Key) Validate() error {
	switch {
	case len(k) > MaxLen:
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalid, len(k), MaxLen)
	case !utf8.ValidString(string(k)):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalid, string(k))
	case k == OrderedPrefix:
		return fmt.Errorf("%w: %q names no partition; use Ordered(name) with a non-empty name", ErrInvalid, string(k))
	}
	return nil
}
