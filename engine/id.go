package engine

import (
	"math/rand/v2"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewID returns a new task id: 26 characters of Crockford base32, a 48-bit millisecond timestamp
// followed by 80 random bits (the ULID layout), so ids sort roughly by creation time and do not
// collide. Order inside a partition never depends on ids: it follows the publish sequence.
func NewID() string {
	var b [26]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := 10; i < 26; i++ {
		// 16 characters take 80 bits: 64 from lo, 16 from hi.
		b[i] = crockford[lo&31]
		lo = lo>>5 | (hi&31)<<59
		hi >>= 5
	}
	return string(b[:])
}
