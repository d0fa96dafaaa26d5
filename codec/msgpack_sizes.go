package codec

import (
	"encoding/binary"
	"fmt"
)

// checkSizes refuses msgpack data that declares more than it holds, before the decoder sees it,
// and reports whether the data holds an extension, whose bytes the decoder may read in a way this
// walk does not (see guardedReader).
//
// The decoder (vmihailenco/msgpack v5.4.1) makes a map or a slice of interface values with the
// length its header declares: the 8 bytes "\xdf\x62\xe8\xf0\x41..." declare a map of 1.6 billion
// entries, and decoding them into a map[string]any took 24 GB before the process died. Every
// element takes at least one byte, so a length above the bytes left cannot be honest: with that
// checked for every header, all the lengths together stay below len(data), and decoding allocates
// in proportion to the payload.
//
// It counts the values still owed instead of keeping a stack, so nesting costs no memory: each
// value read pays one, a container adds its elements (twice its entries for a map). It stops at
// the end of the first value, like the decoder, and leaves malformed codes and truncated data for
// the decoder to report. An extension's data are opaque to it.
func checkSizes(data []byte) (hasExt bool, err error) {
	owed := 1 // values still to read
	for i := 0; owed > 0 && i < len(data); {
		c := data[i]
		i++
		owed--
		var size, elems int // bytes of payload after the header; values the container adds
		ok := true          // false: the length header itself is cut off
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc1 || c == 0xc2 || c == 0xc3:
			// fixint, nil, (never used), false, true
		case c <= 0x8f:
			elems = 2 * int(c&0x0f) // fixmap
		case c <= 0x9f:
			elems = int(c & 0x0f) // fixarray
		case c <= 0xbf:
			size = int(c & 0x1f) // fixstr
		case c == 0xc4 || c == 0xd9: // bin8, str8
			size, i, ok = length(data, i, 1)
		case c == 0xc5 || c == 0xda: // bin16, str16
			size, i, ok = length(data, i, 2)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			size, i, ok = length(data, i, 4)
		case c == 0xc7: // ext8: length, then a type byte
			size, i, ok = length(data, i, 1)
			size++
			hasExt = true
		case c == 0xc8: // ext16
			size, i, ok = length(data, i, 2)
			size++
			hasExt = true
		case c == 0xc9: // ext32
			size, i, ok = length(data, i, 4)
			size++
			hasExt = true
		case c == 0xca:
			size = 4 // float32
		case c == 0xcb:
			size = 8 // float64
		case c >= 0xcc && c <= 0xcf:
			size = 1 << (c - 0xcc) // uint8 … uint64
		case c >= 0xd0 && c <= 0xd3:
			size = 1 << (c - 0xd0) // int8 … int64
		case c >= 0xd4 && c <= 0xd8:
			size = 1 + 1<<(c-0xd4) // fixext1 … fixext16: a type byte and 1 … 16 bytes
			hasExt = true
		case c == 0xdc: // array16
			elems, i, ok = length(data, i, 2)
		case c == 0xdd: // array32
			elems, i, ok = length(data, i, 4)
		case c == 0xde: // map16
			elems, i, ok = length(data, i, 2)
			elems *= 2
		case c == 0xdf: // map32
			elems, i, ok = length(data, i, 4)
			elems *= 2
		}
		if !ok {
			return hasExt, nil // truncated header: the decoder reports it
		}
		left := len(data) - i
		if size > left || elems > left-owed {
			return hasExt, fmt.Errorf("msgpack: code 0x%02x at byte %d declares %d bytes and %d values, but %d bytes are left",
				c, i, size, elems, left)
		}
		i += size
		owed += elems
	}
	return hasExt, nil
}

// length reads the n-byte big-endian length at data[i:] and returns it and the index after it;
// ok is false when fewer than n bytes are left.
func length(data []byte, i, n int) (v, next int, ok bool) {
	if len(data)-i < n {
		return 0, i, false
	}
	switch n {
	case 1:
		return int(data[i]), i + 1, true
	case 2:
		return int(binary.BigEndian.Uint16(data[i:])), i + 2, true
	default:
		return int(binary.BigEndian.Uint32(data[i:])), i + 4, true
	}
}
