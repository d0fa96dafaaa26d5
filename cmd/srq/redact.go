package main

import (
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// redacted stands for the credentials a URL held.
const redacted = "xxxxx"

// userInfo finds the credentials of a Redis URL by hand, since a malformed URL may not parse: the
// text between "//" (or the scheme's colon, or the start) and the last "@". It returns where they
// start and end in u; ok is false when u has no "@" after that point.
func userInfo(u string) (start, end int, ok bool) {
	if i := strings.Index(u, "//"); i >= 0 {
		start = i + 2
	} else if m := schemeRE.FindStringIndex(u); m != nil {
		start = m[1]
	}
	at := strings.LastIndexByte(u[start:], '@')
	if at < 0 {
		return 0, 0, false
	}
	return start, start + at, true
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// redactURL returns u with its credentials replaced by "xxxxx", for every message that shows a
// Redis URL: "redis://user:xxxxx@host:6379/0", "redis://:xxxxx@host"; user info without a colon
// (a password go-redis would send as the user name) becomes "xxxxx" whole. A URL without an "@"
// is returned as it is.
func redactURL(u string) string {
	start, end, ok := userInfo(u)
	if !ok {
		return u
	}
	info := redacted
	if user, _, hasPass := strings.Cut(u[start:end], ":"); hasPass {
		info = user + ":" + redacted
	}
	return u[:start] + info + u[end:]
}

// errUserInfo is why a URL whose credentials, as redactURL finds them, hold '/', '?' or '#' is
// refused: a URL parser ends the host there, and would read a part of the password as the path,
// the query or the fragment, and quote it in its errors or connect to a part of it as a host.
var errUserInfo = errors.New(`the text before its last "@" (the user and password) holds "/", "?" or "#": ` +
	`percent-encode them (%2F, %3F, %23), and an "@" elsewhere in the URL (%40)`)

// checkUserInfo refuses, with errUserInfo, a URL whose credentials (the text redactURL hides) hold
// a character that would end them for a URL parser; the error names no part of them.
func checkUserInfo(u string) error {
	start, end, ok := userInfo(u)
	if ok && strings.ContainsAny(u[start:end], "/?#") {
		return errUserInfo
	}
	return nil
}

// quotedRE matches the Go-quoted fragments net/url's and go-redis's errors cite.
var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// urlError explains why u did not parse, without what redactURL hides: a *url.Error's text
// repeats the whole URL, so only its cause is kept, and a fragment of the credentials the cause
// cites (an invalid port or escape cut from a password) is replaced as well.
func urlError(u string, err error) string {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	start, end, ok := userInfo(u)
	if !ok || start == end {
		return msg
	}
	secret := u[start:end]
	msg = strings.ReplaceAll(msg, u, redactURL(u))
	msg = quotedRE.ReplaceAllStringFunc(msg, func(q string) string {
		if s, err := strconv.Unquote(q); err == nil && s != "" && strings.Contains(secret, s) {
			return strconv.Quote(redacted)
		}
		return q
	})
	if _, pass, hasPass := strings.Cut(secret, ":"); hasPass && pass != "" {
		msg = strings.ReplaceAll(msg, pass, redacted)
	}
	return strings.ReplaceAll(msg, secret, redacted)
}
