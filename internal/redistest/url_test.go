package redistest

import "testing"

// REDIS_URL may be a bare host:port, as for the quick start (devredis.ParseURL).
func TestOptionsOfABareHostPort(t *testing.T) {
	t.Parallel()
	s := &Server{Kind: KindURL, URL: "127.0.0.1:6390"}
	if o := s.Options(); o.Addr != "127.0.0.1:6390" {
		t.Fatalf("Options of REDIS_URL 127.0.0.1:6390: addr %q", o.Addr)
	}
}
