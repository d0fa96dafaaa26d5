package codec

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// TypeChecker is a Codec that can tell, once, before any value is encoded, that it cannot carry
// the values of a type. srq.NewQueue calls CheckType with the queue's payload type when its codec
// implements TypeChecker, and refuses the type when it returns an error. MsgPack and JSON
// implement it; a codec of your own may.
type TypeChecker interface {
	Codec
	// CheckType returns nil when the codec can carry the values of t, else an error saying why.
	CheckType(t reflect.Type) error
}

// CheckType refuses a struct type that msgpack would encode as an empty map: one with fields, none
// of them exported (or all tagged `msgpack:"-"`), and no encoding of its own (msgpack.CustomEncoder,
// msgpack.Marshaler, encoding.BinaryMarshaler or encoding.TextMarshaler). Its values would reach the
// handler as zero values. A struct with no fields at all, such as struct{}, loses nothing and is
// accepted, as is every type that is not a struct or a pointer (to a pointer …) to one. A type
// encoded only through msgpack.RegisterExtEncoder and RegisterExtDecoder, with none of those
// methods, is refused all the same: give it a codec of your own.
func (MsgPack) CheckType(t reflect.Type) error { return checkType("msgpack", "msgpack", t) }

// CheckType refuses a struct type that encoding/json would encode as {}: one with fields, none of
// them exported (or all tagged `json:"-"`), and no encoding of its own (json.Marshaler or
// encoding.TextMarshaler). Its values would reach the handler as zero values. A struct with no
// fields at all, such as struct{}, loses nothing and is accepted, as is every type that is not a
// struct or a pointer (to a pointer …) to one.
func (JSON) CheckType(t reflect.Type) error { return checkType("json", "json", t) }

var (
	jsonMarshaler    = reflect.TypeFor[json.Marshaler]()
	textMarshaler    = reflect.TypeFor[encoding.TextMarshaler]()
	binaryMarshaler  = reflect.TypeFor[encoding.BinaryMarshaler]()
	msgpackEncoder   = reflect.TypeFor[msgpack.CustomEncoder]()
	msgpackMarshaler = reflect.TypeFor[msgpack.Marshaler]()
)

// checkType is CheckType of the codec name, whose struct tag is tag ("json" or "msgpack").
func checkType(name, tag string, t reflect.Type) error {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.NumField() == 0 || ownEncoding(tag, t) || encodesSome(tag, t, map[reflect.Type]bool{}) {
		return nil
	}
	return fmt.Errorf(`srq/codec: %s would encode %v as an empty object: it has no exported fields (or every one is tagged %s:"-"), so every value would reach the handler as a zero value; export its fields, or give it an encoding of its own`,
		name, t, tag)
}

// ownEncoding says whether t (or *t) encodes itself for the codec of struct tag tag.
func ownEncoding(tag string, t reflect.Type) bool {
	ifaces := []reflect.Type{jsonMarshaler, textMarshaler}
	if tag == "msgpack" {
		ifaces = []reflect.Type{msgpackEncoder, msgpackMarshaler, binaryMarshaler, textMarshaler}
	}
	for _, i := range ifaces {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return true
		}
	}
	return false
}

// encodesSome says whether the codec of struct tag tag encodes any field of struct t: an exported
// field not tagged "-", or an embedded one that carries some (the fields of an embedded struct are
// promoted, exported or not; msgpack also keeps an embedded non-struct field unexported). seen
// guards against embedded pointer cycles.
func encodesSome(tag string, t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if tagName(f.Tag.Get(tag)) == "-" {
			continue
		}
		if f.Anonymous {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if ownEncoding(tag, ft) || encodesSome(tag, ft, seen) {
					return true
				}
				continue
			}
			if tag == "msgpack" || f.IsExported() {
				return true
			}
			continue
		}
		if f.IsExported() {
			return true
		}
	}
	return false
}

// tagName is the name part of a struct tag's value; "-" means the field is left out. A json tag
// of "-," names a field "-", which is kept.
func tagName(v string) string {
	if v == "-" {
		return "-"
	}
	name, _, _ := strings.Cut(v, ",")
	if name == "-" {
		return "-," // kept, under the name "-"
	}
	return name
}
