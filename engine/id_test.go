package engine

import (
	"strings"
	"testing"
	"time"
)

// idTime decodes the millisecond timestamp in the first 10 characters of id.
func idTime(t *testing.T, id string) int64 {
	t.Helper()
	var ms int64
	for i := 0; i < 10; i++ {
		v := strings.IndexByte(crockford, id[i])
		if v < 0 {
			t.Fatalf("id %q: %q is not Crockford base32", id, id[i])
		}
		ms = ms<<5 | int64(v)
	}
	return ms
}

func TestNewIDFormatAndUniqueness(t *testing.T) {
	t.Parallel()
	if len(crockford) != 32 || strings.ContainsAny(crockford, "ILOU") || strings.ToUpper(crockford) != crockford {
		t.Fatalf("alphabet %q is not Crockford base32", crockford)
	}
	const n = 100_000
	seen := make(map[string]struct{}, n)
	var symbols [26]map[byte]bool
	for i := range symbols {
		symbols[i] = map[byte]bool{}
	}
	before := time.Now().UnixMilli()
	first, prev := NewID(), ""
	for i := 0; i < n; i++ {
		id := NewID()
		if len(id) != 26 {
			t.Fatalf("NewID() = %q, %d characters, want 26", id, len(id))
		}
		for j := 0; j < len(id); j++ {
			if strings.IndexByte(crockford, id[j]) < 0 {
				t.Fatalf("NewID() = %q: %q is not Crockford base32", id, id[j])
			}
			symbols[j][id[j]] = true
		}
		if id[0] > '7' {
			t.Fatalf("NewID() = %q: the first character must hold only 3 bits of a 48-bit time", id)
		}
		if err := validID(id, false); err != nil {
			t.Fatalf("validID(%q) = %v", id, err)
		}
		if _, dup := seen[id]; dup {
			t.Fatalf("NewID() returned %q twice in %d calls", id, i+1)
		}
		seen[id] = struct{}{}
		if id[:10] < prev {
			t.Fatalf("time prefix went backwards: %q after %q", id[:10], prev)
		}
		prev = id[:10]
	}
	after := time.Now().UnixMilli()
	if ms := idTime(t, first); ms < before {
		t.Fatalf("first id %q encodes %d ms, before the start %d", first, ms, before)
	}
	if ms := idTime(t, prev); ms > after {
		t.Fatalf("last id encodes %d ms, after the end %d", ms, after)
	}
	// The 80 random bits reach every character: each random position takes all 32 values.
	for j := 10; j < 26; j++ {
		if len(symbols[j]) != 32 {
			t.Errorf("position %d took only %d of 32 symbols in %d ids", j, len(symbols[j]), n)
		}
	}
}

func TestNewIDTimePrefixSortsWithTime(t *testing.T) {
	t.Parallel()
	before := time.Now().UnixMilli()
	a := NewID()
	after := time.Now().UnixMilli()
	ms := idTime(t, a)
	if ms < before || ms > after {
		t.Fatalf("NewID() = %q encodes %d ms, want within [%d, %d]", a, ms, before, after)
	}
	// Wait, on a condition with a deadline, for the clock to move past a's millisecond.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().UnixMilli() <= ms {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not advance")
		}
	}
	b := NewID()
	if mb := idTime(t, b); mb <= ms {
		t.Fatalf("later id %q encodes %d ms, not after %d", b, mb, ms)
	}
	if !(a[:10] < b[:10]) || !(a < b) {
		t.Fatalf("later id %q does not sort after %q", b, a)
	}
}
