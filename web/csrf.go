package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/srqueue/srq/engine"
)

// csrf protects mutating requests twice: the browser's own cross-origin signals (Sec-Fetch-Site,
// Origin, checked by http.CrossOriginProtection) must not say cross-site, and the form must carry a
// token this handler issued: the issue time and an HMAC of it and of the browser's session id
// under a secret the pages never show. A page on another site can neither read a token
// (same-origin policy) nor forge one, and a token seen elsewhere (a proxy's log, a screenshot)
// is refused without the session cookie of the browser it was issued to.
type csrf struct {
	secret []byte
	ttl    time.Duration
	origin *http.CrossOriginProtection
	now    func() time.Time
}

const tokenDomain = "srq-web-csrf-v2\x00"

// sessionCookie holds the browser's session id, which its tokens are bound to: 26 characters of
// base32 (rand.Text, 128 random bits), set by the first page the browser gets. It is HttpOnly,
// SameSite=Lax, Secure on a TLS connection, and has no Path: the browser sends it to the directory
// of the page that set it, which is where the dashboard is mounted.
const sessionCookie = "srq_browser"

var (
	// errBadToken is why a mutating request without a valid token is refused.
	errBadToken = errors.New("missing, malformed or expired form token: reload the page and try again")
	// errNoSession is why a mutating request without the session cookie is refused.
	errNoSession = errors.New("no dashboard session cookie: reload the page (with cookies allowed for this site) and try again")
)

func newCSRF(secret []byte, ttl time.Duration, trusted []string) (*csrf, error) {
	if secret == nil {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("srq web: csrf secret: %w", err)
		}
	}
	origin := http.NewCrossOriginProtection()
	for _, o := range trusted {
		if err := origin.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("srq web: %w: trusted origin: %w", engine.ErrInvalid, err)
		}
	}
	return &csrf{secret: secret, ttl: ttl, origin: origin, now: time.Now}, nil
}

func (c *csrf) mac(session, issued string) string {
	h := hmac.New(sha256.New, c.secret)
	h.Write([]byte(tokenDomain))
	h.Write([]byte(session))
	h.Write([]byte{0})
	h.Write([]byte(issued))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// token returns a new token for the session: "<unix seconds>.<hmac>".
func (c *csrf) token(session string) string {
	issued := strconv.FormatInt(c.now().Unix(), 10)
	return issued + "." + c.mac(session, issued)
}

// session returns the session id r's cookie holds, or a new one, which it sets as the cookie on w.
func (c *csrf) session(w http.ResponseWriter, r *http.Request) string {
	if id, ok := sessionOf(r); ok {
		return id
	}
	id := rand.Text()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil})
	return id
}

// sessionOf reads the session id of r's cookie; ok is false when there is none or it is malformed.
func sessionOf(r *http.Request) (string, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || len(ck.Value) != 26 {
		return "", false
	}
	for _, b := range []byte(ck.Value) {
		if (b < 'A' || b > 'Z') && (b < '2' || b > '7') {
			return "", false
		}
	}
	return ck.Value, true
}

// check refuses a request that a browser marks as cross-origin, one without a session cookie, and
// one whose form token is missing, forged, issued to another session or older than the TTL.
func (c *csrf) check(r *http.Request, token string) error {
	if err := c.origin.Check(r); err != nil {
		return fmt.Errorf("cross-origin request refused: %w", err)
	}
	session, ok := sessionOf(r)
	if !ok {
		return errNoSession
	}
	issued, mac, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(c.mac(session, issued))) {
		return errBadToken
	}
	sec, err := strconv.ParseInt(issued, 10, 64)
	if err != nil {
		return errBadToken
	}
	age := c.now().Sub(time.Unix(sec, 0))
	if age > c.ttl || age < -time.Minute {
		return errBadToken
	}
	return nil
}
