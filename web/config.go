package web

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// Defaults of Config.
const (
	DefaultRefreshInterval = 2 * time.Second
	DefaultPageSize        = 50
	// MaxPageSize is the most rows a page shows, whatever the request asks.
	MaxPageSize = inspect.MaxLimit
	// DefaultTokenTTL is how long a form's CSRF token is accepted, from the browser session it was
	// issued to only.
	DefaultTokenTTL = 12 * time.Hour
	// minRefreshInterval keeps the pages from polling Redis more than four times a second.
	minRefreshInterval = 250 * time.Millisecond
	// maxFormBytes bounds the body of a mutating request.
	maxFormBytes = 1 << 20
)

// ErrForbidden, returned (or wrapped) by Config.Auth, refuses a request with 403 Forbidden; any
// other error from Auth refuses it with 401 Unauthorized.
var ErrForbidden = errors.New("srq web: forbidden")

// Config configures the dashboard. Zero values mean the documented defaults.
type Config struct {
	// Auth decides whether a request may proceed; it sees every request, pages, JSON, static
	// files and mutations (r.Method is POST) alike. It returns nil to allow, an error wrapping
	// ErrForbidden to answer 403, and any other error to answer 401. Default nil: allow all, so
	// mount the handler behind your own authentication or set this.
	Auth func(*http.Request) error
	// AuthChallenge, when set, is sent as the WWW-Authenticate header of 401 answers, such as
	// `Basic realm="srq"` to make browsers ask for a password. Default: none.
	AuthChallenge string
	// ReadOnly hides the buttons and refuses every mutating request with 403. Default false.
	ReadOnly bool
	// RefreshInterval is how often open pages poll the counts and the throughput chart. Default
	// DefaultRefreshInterval; at least 250ms.
	RefreshInterval time.Duration
	// PageSize is how many rows a list shows unless the request asks for another number. Default
	// DefaultPageSize; at most MaxPageSize.
	PageSize int
	// Logger receives one line per mutation (who did what to which queue) and one per failed
	// request. Default slog.Default().
	Logger *slog.Logger
	// CSRFSecret keys the HMAC of the forms' CSRF tokens. Default: 32 random bytes per process,
	// so a form only works against the process that served it; give every replica behind one
	// load balancer the same secret of at least 32 bytes.
	CSRFSecret []byte
	// TokenTTL is how long a form's CSRF token is accepted. A token is bound to the session cookie
	// of the browser whose page carried it, so it cannot be replayed from elsewhere within the TTL.
	// Default DefaultTokenTTL.
	TokenTTL time.Duration
	// TrustedOrigins are origins ("https://ops.example.com") from which cross-origin mutating
	// requests are allowed, for a proxy that serves the dashboard under another host name.
	// Default: none; only same-origin requests may mutate.
	TrustedOrigins []string
	// AllowedHosts are the host names and addresses, beside localhost and the loopback addresses,
	// that requests may name in their Host header: "ops.example.com" on any port,
	// "ops.example.com:8443" on that port only, "10.0.0.5", "[fd00::5]:8080"; "*" answers every
	// host. A request for another host is answered 421 Misdirected Request on every path, before
	// Auth, so that a page on another site whose DNS name was pointed at the dashboard's address
	// (DNS rebinding) can neither read it nor post to it. The address a request's connection was
	// accepted on is always allowed as its Host. Default: none, which checks the requests that
	// come over a loopback connection only (they must name localhost or a loopback address) and
	// answers every host on other connections, whose names the handler cannot know. Behind a
	// proxy that passes its public host name on, list that name. NewHandler fails with an error
	// wrapping engine.ErrInvalid for a malformed entry.
	AllowedHosts []string
}

// withDefaults fills zero fields and checks the others; it fails for a negative or too small
// interval, a negative page size or TTL, a short CSRF secret or a malformed trusted origin.
func (c Config) withDefaults() (Config, error) {
	if c.RefreshInterval < 0 || c.PageSize < 0 || c.TokenTTL < 0 {
		return c, fmt.Errorf("srq web: %w: negative RefreshInterval, PageSize or TokenTTL", engine.ErrInvalid)
	}
	c.RefreshInterval = max(cmp.Or(c.RefreshInterval, DefaultRefreshInterval), minRefreshInterval)
	c.PageSize = min(cmp.Or(c.PageSize, DefaultPageSize), MaxPageSize)
	c.TokenTTL = cmp.Or(c.TokenTTL, DefaultTokenTTL)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.CSRFSecret != nil && len(c.CSRFSecret) < 32 {
		return c, fmt.Errorf("srq web: %w: CSRFSecret has %d bytes, want at least 32", engine.ErrInvalid, len(c.CSRFSecret))
	}
	return c, nil
}
