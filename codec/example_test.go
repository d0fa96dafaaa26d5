package codec_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/devredis"
)

type Signup struct {
	Email string `json:"email"`
	Plan  string `json:"plan"`
}

// Store payloads as JSON instead of the default MessagePack, so that redis-cli and producers or
// consumers in other languages can read them. Every producer and worker of a queue must use the
// same codec: a payload another codec cannot decode is dead-lettered at once.
func ExampleJSON() {
	client, stop := devredis.MustEmbedded() // a real Redis in production
	defer stop()
	ctx := context.Background()

	q, err := srq.NewQueue[Signup](client, srq.QueueConfig{Name: "signups", Codec: codec.JSON{}})
	if err != nil {
		panic(err)
	}
	res, err := q.Publish(ctx, Signup{Email: "ann@example.com", Plan: "pro"}, nil)
	if err != nil {
		panic(err)
	}
	stored, err := q.Engine().Task(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Printf("in Redis: %s\n", stored.Payload)

	w, err := srq.NewWorker(q, srq.HandlerFunc[Signup](func(_ context.Context, t *srq.Task[Signup]) error {
		fmt.Printf("handled: %+v\n", t.Value)
		return nil
	}), srq.WorkerConfig{})
	if err != nil {
		panic(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		panic(err)
	}
	// Output:
	// in Redis: {"email":"ann@example.com","plan":"pro"}
	// handled: {Email:ann@example.com Plan:pro}
}

// Raw is for values that are bytes already, such as a webhook's body or a message encoded with
// protobuf elsewhere: they are stored as they are, with no second encoding around them.
func ExampleRaw() {
	client, stop := devredis.MustEmbedded() // a real Redis in production
	defer stop()
	ctx := context.Background()

	q, err := srq.NewQueue[[]byte](client, srq.QueueConfig{Name: "webhooks", Codec: codec.Raw{}})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"event":"invoice.paid"}`)
	res, err := q.Publish(ctx, body, nil)
	if err != nil {
		panic(err)
	}
	stored, err := q.Engine().Task(ctx, res.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("stored unchanged:", bytes.Equal(stored.Payload, body))
	// Output:
	// stored unchanged: true
}
