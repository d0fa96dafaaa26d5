package codec_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	mp "github.com/vmihailenco/msgpack/v5"

	"github.com/srqueue/srq/codec"
)

type (
	secret struct {
		user   string
		amount int
	}
	allDashed struct {
		User   string `json:"-" msgpack:"-"`
		Amount int    `json:"-" msgpack:"-"`
	}
	jsonDashed struct {
		User string `json:"-"` // msgpack keeps it
	}
	mixed struct {
		user   string
		Amount int
	}
	withSecret struct{ secret } // an embedded struct without exported fields promotes nothing
	withMixed  struct{ mixed }  // …one with some promotes them
	cycle      struct {
		*cycle
		n int
	}
	named     int
	withNamed struct{ named } // unexported embedded non-struct: json drops it, msgpack keeps it
	selfJSON  struct{ v int }
	selfText  struct{ v int }
	extOnly   struct{ v int } // encoded by msgpack.RegisterExtEncoder alone
)

func init() {
	mp.RegisterExtEncoder(71, extOnly{}, func(_ *mp.Encoder, v reflect.Value) ([]byte, error) {
		return []byte{byte(v.Interface().(extOnly).v)}, nil
	})
	mp.RegisterExtDecoder(71, extOnly{}, func(d *mp.Decoder, v reflect.Value, n int) error {
		b := make([]byte, n)
		if err := d.ReadFull(b); err != nil {
			return err
		}
		v.Set(reflect.ValueOf(extOnly{int(b[0])}))
		return nil
	})
}

func (s selfJSON) MarshalJSON() ([]byte, error)  { return json.Marshal(s.v) }
func (s *selfText) MarshalText() ([]byte, error) { return []byte("x"), nil }

// TestCheckType: MsgPack and JSON refuse a struct type they would encode as an empty object, with
// an error naming the codec, the type and why, and accept every other type.
func TestCheckType(t *testing.T) {
	t.Parallel()
	msgpack, js := codec.Codec(codec.MsgPack{}), codec.Codec(codec.JSON{})
	for _, tc := range []struct {
		v       any
		refused []codec.Codec
	}{
		{secret{}, []codec.Codec{msgpack, js}},
		{&secret{}, []codec.Codec{msgpack, js}},
		{(**secret)(nil), []codec.Codec{msgpack, js}},
		{extOnly{}, []codec.Codec{msgpack, js}},
		{allDashed{}, []codec.Codec{msgpack, js}},
		{jsonDashed{}, []codec.Codec{js}},
		{withSecret{}, []codec.Codec{msgpack, js}},
		{cycle{nil, 1}, []codec.Codec{msgpack, js}},
		{withNamed{named(1)}, []codec.Codec{js}},
		{mixed{}, nil},
		{withMixed{}, nil},
		{struct{}{}, nil}, // nothing to lose
		{selfJSON{1}, []codec.Codec{msgpack}},
		{selfText{1}, nil},
		{time.Time{}, nil},
		{"", nil},
		{0, nil},
		{[]byte(nil), nil},
		{map[string]int(nil), nil},
		{[]secret(nil), nil}, // a slice of them: checked no further
		{(*any)(nil), nil},
	} {
		typ := reflect.TypeOf(tc.v)
		for _, c := range []codec.Codec{msgpack, js} {
			err := c.(codec.TypeChecker).CheckType(typ)
			want := false
			for _, r := range tc.refused {
				want = want || r == c
			}
			if (err != nil) != want {
				t.Errorf("%s.CheckType(%v) = %v, want refused %v", c.Name(), typ, err, want)
				continue
			}
			if err != nil && (!strings.Contains(err.Error(), c.Name()) || !strings.Contains(err.Error(), "no exported fields") ||
				!strings.Contains(err.Error(), strings.TrimLeft(typ.String(), "*"))) {
				t.Errorf("%s.CheckType(%v): %q does not name the codec, the type and why", c.Name(), typ, err)
			}
		}
	}
	if _, ok := codec.Codec(codec.Raw{}).(codec.TypeChecker); ok {
		t.Error("Raw is a TypeChecker; it checks its values when it encodes them")
	}
}

// TestCheckTypeMatchesEncoding: a type CheckType refuses does encode as an empty object, and one
// with a single exported field does not: the check says what the codec does.
func TestCheckTypeMatchesEncoding(t *testing.T) {
	t.Parallel()
	for _, c := range []codec.Codec{codec.MsgPack{}, codec.JSON{}} {
		empty, err := c.Marshal(struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []any{secret{"bob", 3}, allDashed{"bob", 3}, withSecret{secret{"bob", 3}}} {
			if err := c.(codec.TypeChecker).CheckType(reflect.TypeOf(v)); err == nil {
				t.Fatalf("%s accepts %T", c.Name(), v)
			}
			got, err := c.Marshal(v)
			if err != nil || string(got) != string(empty) {
				t.Fatalf("%s encodes %#v as %q, %v; the check says it is empty (%q)", c.Name(), v, got, err, empty)
			}
		}
		got, err := c.Marshal(mixed{"bob", 3})
		if err != nil || string(got) == string(empty) {
			t.Fatalf("%s encodes mixed as %q, %v", c.Name(), got, err)
		}
	}
	if err := (codec.MsgPack{}).CheckType(nil); err != nil {
		t.Fatalf("CheckType(nil): %v", err)
	}
}
