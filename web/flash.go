package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The message a page shows after a mutation ("Purged 3 dead letters.") is written by the mutation
// and carried to the page the browser is sent back to in the flash parameter, signed: the time it
// was issued, the message, and an HMAC of both and of the browser's session id under the CSRF
// secret. A page shows it only to the browser that made the change and for flashTTL, so a link
// crafted or passed around cannot put text of its own into the dashboard's banner.

// flashTTL is how long a signed message is shown: time enough for the browser to follow the
// redirect.
const flashTTL = 2 * time.Minute

const flashDomain = "srq-web-flash-v1\x00"

func (c *csrf) flashMAC(session, issued, msg string) string {
	h := hmac.New(sha256.New, c.secret)
	h.Write([]byte(flashDomain))
	h.Write([]byte(session))
	h.Write([]byte{0})
	h.Write([]byte(issued))
	h.Write([]byte{0})
	h.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// sealFlash returns msg signed for the session: "<unix seconds>.<msg, base64>.<hmac>".
func (c *csrf) sealFlash(session, msg string) string {
	issued := strconv.FormatInt(c.now().Unix(), 10)
	return issued + "." + base64.RawURLEncoding.EncodeToString([]byte(msg)) + "." + c.flashMAC(session, issued, msg)
}

// openFlash returns the message of a value sealFlash made for the session within flashTTL; ok is
// false for anything else.
func (c *csrf) openFlash(session, value string) (msg string, ok bool) {
	issued, rest, ok1 := strings.Cut(value, ".")
	enc, mac, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !hmac.Equal([]byte(mac), []byte(c.flashMAC(session, issued, string(b)))) {
		return "", false
	}
	sec, err := strconv.ParseInt(issued, 10, 64)
	if err != nil {
		return "", false
	}
	if age := c.now().Sub(time.Unix(sec, 0)); age > flashTTL || age < -time.Minute {
		return "", false
	}
	return string(b), true
}

// flash is the message the page for r shows: the one its flash parameter carries, when it was
// signed for the browser's session and is fresh; else none.
func (h *handler) flash(r *http.Request) string {
	v := r.URL.Query().Get("flash")
	if v == "" {
		return ""
	}
	session, ok := sessionOf(r)
	if !ok {
		return ""
	}
	msg, _ := h.csrf.openFlash(session, v)
	return msg
}

// withFlash adds msg, signed for session, to the relative URL loc as its flash parameter.
func (h *handler) withFlash(loc, session, msg string) string {
	if msg == "" {
		return loc
	}
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	return loc + sep + "flash=" + urlQueryEscape(h.csrf.sealFlash(session, msg))
}
