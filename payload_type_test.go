package srq_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/internal/redistest"
)

// secretPayload has no exported field: msgpack and JSON would encode it as an empty object.
type secretPayload struct {
	user   string
	amount int
}

// dashedPayload's only exported field is left out by both codecs.
type dashedPayload struct {
	User string `json:"-" msgpack:"-"`
}

// TestNewQueueRefusesEmptyPayloadTypes: NewQueue refuses, with ErrInvalid and a message that says
// why, a payload type the MsgPack (default) or JSON codec would encode as an empty object, and
// accepts raw bytes, strings, maps, struct{} and structs with an exported field.
func TestNewQueueRefusesEmptyPayloadTypes(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	name := redistest.Queue(t)
	check := func(what string, err error, refused bool) {
		t.Helper()
		switch {
		case refused && (!errors.Is(err, srq.ErrInvalid) || !strings.Contains(err.Error(), "no exported fields") ||
			!strings.Contains(err.Error(), "empty object")):
			t.Errorf("%s: %v, want ErrInvalid saying it has no exported fields", what, err)
		case !refused && err != nil:
			t.Errorf("%s: %v, want it accepted", what, err)
		}
	}
	for _, cd := range []codec.Codec{nil, codec.MsgPack{}, codec.JSON{}} {
		cfg := srq.QueueConfig{Name: name, Codec: cd}
		what := "default codec"
		if cd != nil {
			what = cd.Name()
		}
		_ = secretPayload{user: "bob", amount: 3} // what a user would publish, and lose
		_, err := srq.NewQueue[secretPayload](c, cfg)
		check(what+", struct{user string; amount int}", err, true)
		_, err = srq.NewQueue[*secretPayload](c, cfg)
		check(what+", *struct{user string; amount int}", err, true)
		_, err = srq.NewQueue[dashedPayload](c, cfg)
		check(what+`, struct{User string "-"}`, err, true)
		_, err = srq.NewQueue[struct{}](c, cfg)
		check(what+", struct{}", err, false)
		_, err = srq.NewQueue[string](c, cfg)
		check(what+", string", err, false)
		_, err = srq.NewQueue[map[string]any](c, cfg)
		check(what+", map", err, false)
		_, err = srq.NewQueue[struct{ User string }](c, cfg)
		check(what+", struct{User string}", err, false)
	}
	_, err := srq.NewQueue[[]byte](c, srq.QueueConfig{Name: name, Codec: codec.Raw{}})
	check("raw, []byte", err, false)
}
