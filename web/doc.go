// Package web is srq's operations dashboard and Prometheus endpoint, as http.Handlers to mount in
// your own service.
//
// NewHandler serves server-rendered pages over an *inspect.Inspector: the queues with a live
// throughput chart, one queue's counts, counters, consumers (live while their heartbeat is
// fresh) and pause switch, its top partitions by depth, age, pause or hold by a dead letter with
// pause and resume buttons, one partition's due and delayed tasks (paged), its tasks by state
// (pending partition by partition, delayed, in flight, dead, completed; paged, with a search by
// id, run now and cancel per task and for the selected), its dead letters (paged, filtered by
// partition and error) with requeue and purge buttons, a task's page (payloads in JSON or msgpack
// shown as JSON, every failed attempt's error, what a waiting task waits for, its progress, its
// children and its parent; run now, cancel, or a dead letter's requeue and purge), its workers (host, pid, queues, handlers running), its schedules (overdue ones
// flagged), its flows and each flow's DAG drawn as inline SVG with a cancel button per step, and
// a live tail of its event stream. Everything
// it needs, CSS and JavaScript included, is embedded: it works offline and loads nothing from
// elsewhere. Every link is relative, so it works under any path prefix.
//
// Reading costs what the Inspector's calls cost (bounded pages, no scans). Mutations are POST
// only and need a same-origin request and a CSRF token from one of the pages, bound to the
// browser's session cookie; Config.ReadOnly
// refuses them all, and Config.Auth sees every request first. Before Auth, a request for a host
// name the dashboard is not meant to be reached by is answered 421 (Config.AllowedHosts; over a
// loopback connection, by default, only localhost and loopback addresses are answered), so a page
// whose DNS name was rebound to the dashboard's address cannot use it; RestrictHosts puts the same
// check in front of other handlers.
//
//	in, err := inspect.New(redisClient, inspect.Config{})
//	dash, err := web.NewHandler(in, web.Config{
//		Auth: func(r *http.Request) error { return checkOperator(r) }, // yours
//	})
//	mux.Handle("/ops/srq/", http.StripPrefix("/ops/srq", dash))
//
//	metrics, err := web.NewMetrics(in, web.MetricsConfig{})
//	mux.Handle("/metrics", metrics)
//	mw, err := middleware.Metrics(middleware.OTelConfig{MeterProvider: metrics.MeterProvider()})
//
// docs/operations.md describes mounting, authentication, read-only mode, the CSRF protection and
// the metrics endpoint; docs/metrics.md lists every metric.
package web
