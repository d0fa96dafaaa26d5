package codec

import (
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// unmarshalGuarded decodes data, which holds an extension, into v through a guardedReader.
func unmarshalGuarded(data []byte, v any) error {
	codes := newBitset(len(data))
	if _, err := walkValue(data, 0, codes); err != nil { // the walk checkSizes passed, now marking
		return err
	}
	r := &guardedReader{data: data, codes: codes, lastCode: -1, unsure: -1}
	dec := msgpack.GetDecoder()
	dec.Reset(r) // as msgpack.Unmarshal does
	err := dec.Decode(v)
	msgpack.PutDecoder(dec)
	return err
}

// guardedReader feeds the decoder a payload that holds an extension and checks the values the
// decoder finds where checkSizes saw none.
//
// checkSizes takes an extension's data as opaque bytes, but the decoder does not always: where the
// destination is a map (map[string]any, for one) it skips an extension's header and reads its data
// as the map, then reads on past the extension for the entries. So the 34 bytes
// "\xd6\x30\xdf000…", a fixext4 whose data begin with a map32 header, made it allocate a map of
// 0x30303030 entries. The extension cannot simply be refused: it is a valid time.Time, and about
// 0.4 % of timestamps begin with that byte; only the destination type decides.
//
// The decoder reads every code with ReadByte, then a 16- or 32-bit length with Read. So the reader
// knows the walk that checkSizes made (the index of every code it read) and, when the decoder reads
// with ReadByte a byte that is neither such a code nor part of the header of the code it read last,
// checks the value that starts there with the same walk before handing the byte over. The decoder
// never sees a length that walk would refuse, whatever it takes the bytes for. Honest payloads read
// as they were written never start such a check, except through an extension decoder that reads its
// data as msgpack values, whose check then passes.
type guardedReader struct {
	data     []byte
	pos      int
	codes    bitset // indexes read as codes by a walk that passed
	lastCode int    // index of the code the decoder read last, or -1
	unsure   int    // index of a byte let through as a header byte that may be a code, or -1
}

// errDiverged wraps the refusal of a value the decoder found inside an extension's data.
var errDiverged = errors.New("msgpack: value read from an extension's data")

func (r *guardedReader) ReadByte() (byte, error) {
	q := r.pos
	if q >= len(r.data) {
		return 0, io.EOF
	}
	r.unsure = -1
	switch {
	case r.inHeader(q):
		if r.data[r.lastCode] == 0xd4 && q == r.lastCode+2 {
			// The data byte of a fixext1: an interned string's index (read with ReadByte), or the
			// code of a value if the extension is read as a map; a Read of its length tells.
			r.unsure = q
		}
	case r.codes.has(q):
		r.lastCode = q
	default:
		if err := r.check(q); err != nil {
			return 0, err
		}
		r.lastCode = q
	}
	r.pos++
	return r.data[q], nil
}

func (r *guardedReader) Read(p []byte) (int, error) {
	if r.unsure >= 0 && r.pos == r.unsure+1 {
		if err := r.check(r.unsure); err != nil {
			return 0, err
		}
	}
	r.unsure = -1
	if r.pos >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.pos:])
	r.pos += n
	return n, nil
}

func (r *guardedReader) UnreadByte() error {
	if r.pos == 0 {
		return errors.New("msgpack: UnreadByte at the start")
	}
	r.pos--
	r.unsure = -1
	return nil
}

// check walks the value at data[q], marking its codes, and refuses it if it declares more than the
// payload holds.
func (r *guardedReader) check(q int) error {
	if _, err := walkValue(r.data, q, r.codes); err != nil {
		return fmt.Errorf("%w: %w", errDiverged, err)
	}
	return nil
}

// inHeader reports whether q is a header byte that the decoder reads with ReadByte after the code
// at lastCode: the value of an 8-bit integer, an 8-bit length, an extension's length and type.
func (r *guardedReader) inHeader(q int) bool {
	if r.lastCode < 0 || q <= r.lastCode {
		return false
	}
	n := 0
	switch r.data[r.lastCode] {
	case 0xcc, 0xd0, 0xc4, 0xd9: // uint8, int8, bin8, str8
		n = 1
	case 0xd4: // fixext1: type, and the data byte an interned string's index is read from
		n = 2
	case 0xd5, 0xd6, 0xd7, 0xd8: // fixext2 … fixext16: type
		n = 1
	case 0xc7: // ext8: length, type
		n = 2
	case 0xc8: // ext16
		n = 3
	case 0xc9: // ext32
		n = 5
	}
	return q <= r.lastCode+n
}
