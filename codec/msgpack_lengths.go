package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// unmarshalGuarded decodes data into v as msgpack.Unmarshal does, through a guardedReader.
func unmarshalGuarded(data []byte, v any) error {
	r := &guardedReader{data: data, lastByte: -1, budget: len(data)}
	dec := msgpack.GetDecoder()
	dec.Reset(r) // as msgpack.Unmarshal does
	err := dec.Decode(v)
	msgpack.PutDecoder(dec)
	return err
}

// errTooLong wraps the guard's refusals.
var errTooLong = errors.New("msgpack: a length read from the payload exceeds it")

// guardedReader feeds the decoder a payload and checks every 16- or 32-bit length as the decoder
// reads it.
//
// The decoder (vmihailenco/msgpack v5.4.1) makes a map or a slice of interface values with the
// length a header declares, before it reads the elements: the 8 bytes "\xdf\x62\xe8\xf0\x41..."
// declare a map of 1.6 billion entries, and decoding them into a map[string]any took 24 GB before
// the process died. A walk over the payload as msgpack lays it out cannot catch every such header:
// where the destination is a map (a map[string]any, or a map-typed field), the decoder skips an
// extension's header and reads its data as the map, then reads on past the extension for the
// entries, so the 34 bytes "\xd6\x30\xdf000…", a fixext4 whose data begin with a map32 header,
// made it allocate a map of 808 million entries. The extension cannot simply be refused: it is a
// valid time.Time, and about 0.4 % of timestamps begin with that byte; only the destination type
// decides how it is read.
//
// So the reader checks lengths where the decoder takes them, whatever it takes the bytes for. The
// decoder reads a code with ReadByte and then the code's 16- or 32-bit length with one Read of 2 or
// 4 bytes. When a Read of that width follows the ReadByte of a code with a length of that width,
// the length must fit in the bytes left, and a container's elements are charged to a budget of
// len(data) for the whole payload, so that nested containers cannot each declare the rest of it:
// all the maps and slices the decoder makes hold at most len(data) elements together (plus at most
// 15 for each fixmap or fixarray, which takes a byte), and decoding allocates in proportion to the
// payload. An honest payload never reaches either limit, as every element takes a byte. The one
// pattern that looks like a length and is not: a fixext2 or fixext4 (or an ext8 of 2 or 4 bytes)
// whose type byte is one of the codes below, which are negative extension types, reserved by the
// msgpack spec; its data are then checked as a length.
//
// Once it has refused, every later read fails too: the decoder drops some errors (a peek for nil)
// and reads on.
type guardedReader struct {
	data     []byte
	pos      int
	lastByte int   // index of the byte the last call, a ReadByte, returned; -1 otherwise
	budget   int   // container elements still allowed
	err      error // the refusal, once there is one
}

func (r *guardedReader) ReadByte() (byte, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.pos >= len(r.data) {
		r.lastByte = -1
		return 0, io.EOF
	}
	r.lastByte = r.pos
	r.pos++
	return r.data[r.lastByte], nil
}

func (r *guardedReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if (len(p) == 2 || len(p) == 4) && r.lastByte >= 0 && r.lastByte == r.pos-1 {
		if err := r.checkLength(r.lastByte, len(p)); err != nil {
			r.err = err
			return 0, err
		}
	}
	r.lastByte = -1
	if len(p) == 0 {
		return 0, nil
	}
	if r.pos >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.pos:])
	r.pos += n
	return n, nil
}

// UnreadByte steps back over the byte the last call, a ReadByte, returned (the decoder peeks at
// codes so); it fails after any other call, so the reader never reads a length twice.
func (r *guardedReader) UnreadByte() error {
	if r.err != nil {
		return r.err
	}
	if r.lastByte < 0 || r.lastByte != r.pos-1 {
		return errors.New("msgpack: UnreadByte not after ReadByte")
	}
	r.pos--
	r.lastByte = -1
	return nil
}

// checkLength checks the length of width bytes after the code at index at, if the code has a
// length of that width.
func (r *guardedReader) checkLength(at, width int) error {
	if len(r.data)-at-1 < width {
		return nil // cut off: the decoder reports it
	}
	var n int
	if width == 2 {
		n = int(binary.BigEndian.Uint16(r.data[at+1:]))
	} else {
		n = int(binary.BigEndian.Uint32(r.data[at+1:]))
	}
	var elems, size int
	switch c := r.data[at]; {
	case width == 2 && c == 0xdc, width == 4 && c == 0xdd: // array16, array32
		elems = n
	case width == 2 && c == 0xde, width == 4 && c == 0xdf: // map16, map32
		elems = 2 * n
	case width == 2 && (c == 0xc5 || c == 0xda), width == 4 && (c == 0xc6 || c == 0xdb): // bin, str
		size = n
	case width == 2 && c == 0xc8, width == 4 && c == 0xc9: // ext16, ext32: a type byte, then data
		size = n + 1
	default:
		return nil
	}
	left := len(r.data) - at - 1 - width
	if size > left || elems > left {
		return fmt.Errorf("%w: code 0x%02x at byte %d declares %d bytes and %d values, but %d bytes are left",
			errTooLong, r.data[at], at, size, elems, left)
	}
	r.budget -= elems
	if r.budget < 0 {
		return fmt.Errorf("%w: the containers up to byte %d declare more values than the %d bytes can hold",
			errTooLong, at, len(r.data))
	}
	return nil
}
