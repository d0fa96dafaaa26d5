package web

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	"github.com/srqueue/srq/engine"
)

// A page on another site whose DNS name the attacker points at 127.0.0.1 (DNS rebinding) is, for
// the browser, same-origin with that name: it can read the dashboard's pages, tokens included,
// and post its forms, whose origin check compares Origin with that same Host. The attack only
// works under a name the attacker controls, so it is stopped by answering only requests whose
// Host is a name the dashboard is meant to be reached by.

// hostCheck decides which Host headers are answered; see Config.AllowedHosts.
type hostCheck struct {
	any   bool            // "*": every host
	names map[string]bool // host names and addresses answered on any port
	ports map[string]bool // "host:port" answered on that port only
	log   *slog.Logger
}

// newHostCheck reads the entries of Config.AllowedHosts; it fails with an error wrapping
// engine.ErrInvalid for a malformed one.
func newHostCheck(allowed []string, log *slog.Logger) (*hostCheck, error) {
	c := &hostCheck{names: map[string]bool{}, ports: map[string]bool{}, log: log}
	for _, a := range allowed {
		if a == "*" {
			c.any = true
			continue
		}
		host, port, ok := splitHost(a)
		if !ok || strings.ContainsAny(a, "/@?#*") {
			return nil, fmt.Errorf("srq web: %w: allowed host %q: want a host name or IP address with an optional port "+
				`("ops.example.com", "ops.example.com:8443", "10.0.0.5", "[::1]:8080"), or "*"`, engine.ErrInvalid, a)
		}
		if port == "" {
			c.names[host] = true
		} else {
			c.ports[net.JoinHostPort(host, port)] = true
		}
	}
	return c, nil
}

// on reports whether any entry was given: without one, only requests over loopback are checked.
func (c *hostCheck) on() bool { return len(c.names) > 0 || len(c.ports) > 0 }

// allows reports whether r may be answered: every request when "*" is allowed; else one whose Host
// is localhost or a loopback address (any port), the address r's connection was accepted on, or an
// allowed host; and, when no host is listed, every request that did not come over loopback.
func (c *hostCheck) allows(r *http.Request) bool {
	if c.any {
		return true
	}
	local := localAddr(r)
	if !c.on() && !local.IsLoopback() {
		return true
	}
	host, port, ok := splitHost(r.Host)
	if !ok {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		if ip.IsLoopback() || (local.IsValid() && ip == local) {
			return true
		}
	}
	return c.names[host] || (port != "" && c.ports[net.JoinHostPort(host, port)])
}

// localAddr is the IP address r's connection was accepted on, zero when the server does not say.
func localAddr(r *http.Request) netip.Addr {
	tcp, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return netip.Addr{}
	}
	return ip.Unmap().WithZone("")
}

// splitHost splits a Host header or an allowed host into its host, lower case without a trailing
// dot or the brackets of an IPv6 address, and its port ("" when none); ok is false when it is
// malformed.
func splitHost(s string) (host, port string, ok bool) {
	s = strings.ToLower(s)
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false
		}
		rest := s[end+1:]
		host = s[1:end]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", "", false
		}
		port = strings.TrimPrefix(rest, ":")
		if _, err := netip.ParseAddr(host); err != nil {
			return "", "", false
		}
	case strings.Count(s, ":") > 1: // an IPv6 address without brackets (an allowed host only)
		if _, err := netip.ParseAddr(s); err != nil {
			return "", "", false
		}
		host = s
	default:
		host, port, _ = strings.Cut(s, ":")
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" || strings.ContainsAny(host, "[]") || strings.IndexFunc(host, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "", "", false
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '+' {
			return "", "", false
		}
	}
	return host, port, true
}

// refuse answers a request for a host the dashboard is not meant to be reached by with 421
// Misdirected Request, on any path, and logs it.
func (c *hostCheck) refuse(w http.ResponseWriter, r *http.Request) {
	c.log.LogAttrs(r.Context(), slog.LevelWarn, "srq web: request refused: Host not allowed",
		slog.String("host", r.Host), slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("remote", r.RemoteAddr))
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	http.Error(w, "srq web: this server does not answer to the host name in the request; "+
		"its operator can allow it (web.Config.AllowedHosts, srq web --allowed-host)", http.StatusMisdirectedRequest)
}

// RestrictHosts returns next behind the Host check that NewHandler applies with
// Config.AllowedHosts, for the handlers served beside the dashboard, such as Metrics: a request for
// a host that is not allowed is answered 421 Misdirected Request and logged at Warn to logger (nil:
// slog.Default()). allowed means what Config.AllowedHosts does. It fails with an error wrapping
// engine.ErrInvalid for a malformed entry.
func RestrictHosts(next http.Handler, allowed []string, logger *slog.Logger) (http.Handler, error) {
	if logger == nil {
		logger = slog.Default()
	}
	c, err := newHostCheck(allowed, logger)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.allows(r) {
			c.refuse(w, r)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}
