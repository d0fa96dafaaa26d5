package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/devredis"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/web"
)

// Mount the dashboard under a path of your service's mux. Its links are relative, so StripPrefix
// is all it takes; put your authentication in front of it, or set Config.Auth.
func ExampleNewHandler() {
	client, stop := devredis.MustEmbedded() // a real Redis in production
	defer stop()
	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "emails"})
	if err != nil {
		panic(err)
	}
	if _, err := q.Publish(context.Background(), "welcome", nil); err != nil {
		panic(err)
	}

	in, err := inspect.New(client, inspect.Config{})
	if err != nil {
		panic(err)
	}
	dash, err := web.NewHandler(in, web.Config{ReadOnly: true}) // no requeue or purge buttons
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/srq/", http.StripPrefix("/ops/srq", dash))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/ops/srq/", nil))
	fmt.Println(rec.Code, "lists emails:", strings.Contains(rec.Body.String(), ">emails<"))
	// Output:
	// 200 lists emails: true
}

// Serve srq's Prometheus metrics: every queue's depth, read at each scrape, and whatever the
// worker's middleware records through MeterProvider.
func ExampleNewMetrics() {
	client, stop := devredis.MustEmbedded() // a real Redis in production
	defer stop()
	ctx := context.Background()
	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: "emails"})
	if err != nil {
		panic(err)
	}
	for _, mail := range []string{"welcome", "receipt"} {
		if _, err := q.Publish(ctx, mail, nil); err != nil {
			panic(err)
		}
	}

	in, err := inspect.New(client, inspect.Config{})
	if err != nil {
		panic(err)
	}
	metrics, err := web.NewMetrics(in, web.MetricsConfig{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = metrics.Shutdown(ctx) }()
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "srq_queue_pending{") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// srq_queue_pending{messaging_destination_name="emails"} 2
}
