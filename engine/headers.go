package engine

import (
	"encoding/binary"
	"errors"
	"sort"
)

// encodeHeaders packs headers as a count followed by length-prefixed keys and values, keys sorted,
// all lengths as uvarints. No headers encode to nothing, so they cost no memory in Redis.
func encodeHeaders(h map[string]string) []byte {
	if len(h) == 0 {
		return nil
	}
	keys := make([]string, 0, len(h))
	size := binary.MaxVarintLen64
	for k, v := range h {
		keys = append(keys, k)
		size += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	sort.Strings(keys)
	b := make([]byte, 0, size)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(h[k])))
		b = append(b, h[k]...)
	}
	return b
}

var errBadHeaders = errors.New("srq: malformed task headers")

// decodeHeaders reverses encodeHeaders. It fails on truncated or trailing bytes and never panics.
func decodeHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return nil, errBadHeaders
	}
	b = b[w:]
	h := make(map[string]string, n)
	next := func() (string, bool) {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(l)])
		b = b[w+int(l):]
		return s, true
	}
	for i := uint64(0); i < n; i++ {
		k, ok := next()
		if !ok {
			return nil, errBadHeaders
		}
		v, ok := next()
		if !ok {
			return nil, errBadHeaders
		}
		h[k] = v
	}
	if len(b) != 0 {
		return nil, errBadHeaders
	}
	return h, nil
}
