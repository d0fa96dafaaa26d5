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
)

// csrf protects mutating requests twice: the browser's own cross-origin signals (Sec-Fetch-Site,
// Origin, checked by http.CrossOriginProtection) must not say cross-site, and the form must carry a
// token this handler issued: the issue time and an HMAC of it under a secret the pages never show.
// A page on another site can neither read a token (same-origin policy) nor forge one.
type csrf struct {
	secret []byte
	ttl    time.Duration
	origin *http.CrossOriginProtection
	now    func() time.Time
}

const tokenDomain = "srq-web-csrf-v1\x00"

// errBadToken is why a mutating request without a valid token is refused.
var errBadToken = errors.New("missing, malformed or expired form token: reload the page and try again")

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
			return nil, fmt.Errorf("srq web: trusted origin: %w", err)
		}
	}
	return &csrf{secret: secret, ttl: ttl, origin: origin, now: time.Now}, nil
}

func (c *csrf) mac(issued string) string {
	h := hmac.New(sha256.New, c.secret)
	h.Write([]byte(tokenDomain))
	h.Write([]byte(issued))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// token returns a new token: "<unix seconds>.<hmac>".
func (c *csrf) token() string {
	issued := strconv.FormatInt(c.now().Unix(), 10)
	return issued + "." + c.mac(issued)
}

// check refuses a request that a browser marks as cross-origin, and one whose form token is
// missing, forged or older than the TTL.
func (c *csrf) check(r *http.Request, token string) error {
	if err := c.origin.Check(r); err != nil {
		return fmt.Errorf("cross-origin request refused: %w", err)
	}
	issued, mac, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(c.mac(issued))) {
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
