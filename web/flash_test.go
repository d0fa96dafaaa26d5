package web

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// phish is text a crafted link would like the banner to show.
const phish = "ALL. Session expired: re-enter your password at http://evil.example/login."

// TestFlashCannotCarryURLText: the banner a page shows after an action comes only from a value the
// handler signed for this browser's session in the last two minutes; a crafted link (the outcome
// parameters of every page, a forged or foreign or stale signed value) shows no banner and none of
// its text.
func TestFlashCannotCarryURLText(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	if _, err := q.Schedule(b.ctx, "nightly", event{}, &srq.ScheduleOpts{Cron: "0 4 * * *"}); err != nil {
		t.Fatal(err)
	}
	ids := b.kill(q, "!p", 1, "boom")
	qp := "q=" + url.QueryEscape(q.Name())
	text := url.QueryEscape(phish)
	crafted := []string{
		"schedules?" + qp + "&done=deleted&s=" + text,
		"schedules?" + qp + "&done=triggered&s=nightly&id=" + text,
		"dead?" + qp + "&done=purged&n=99999",
		"queue?" + qp + "&done=paused-partition&p=" + text,
		"partitions?" + qp + "&done=resumed-partition&p=" + text,
		"partition?" + qp + "&p=!p&done=paused-partition&p=" + text,
		"task?" + qp + "&id=" + ids[0] + "&done=cancelled&t=" + text,
		"?done=requeued&n=7&p=" + text + "&s=" + text + "&t=" + text,
	}
	// A value signed for another session, a forged signature, an expired one and garbage.
	issued := func(age time.Duration) string { return strconv.FormatInt(time.Now().Add(-age).Unix(), 10) }
	enc := base64.RawURLEncoding.EncodeToString([]byte(phish))
	for _, v := range []string{
		b.h.csrf.sealFlash("AAAAAAAAAAAAAAAAAAAAAAAAAA", phish),
		issued(0) + "." + enc + "." + b.h.csrf.flashMAC(b.session, issued(0), "Purged 1 dead letter."),
		issued(3*time.Minute) + "." + enc + "." + b.h.csrf.flashMAC(b.session, issued(3*time.Minute), phish),
		issued(0) + "." + enc,
		phish,
	} {
		crafted = append(crafted, "schedules?"+qp+"&flash="+url.QueryEscape(v))
	}
	for _, path := range crafted {
		body := b.get(path).body
		if strings.Contains(body, `id="flash"`) || strings.Contains(body, "evil.example") || strings.Contains(body, "99999") {
			t.Errorf("GET %s shows a banner or its text:\n%s", path, body)
		}
	}
	// The same value signed for this session is shown: the checks above refuse what is forged, not
	// every banner.
	good := "schedules?" + qp + "&flash=" + url.QueryEscape(b.h.csrf.sealFlash(b.session, "Deleted schedule nightly."))
	if got := stat(t, b.mustGet(good), "flash"); got != "Deleted schedule nightly." {
		t.Errorf("a banner signed for this session: %q", got)
	}
	// An action's banner says what it did, with values from the form it acted on and from Redis.
	page := b.follow("delete-schedule", b.post("delete-schedule", url.Values{"q": {q.Name()}, "schedule": {"nightly"}}))
	if got := stat(t, page, "flash"); got != "Deleted schedule nightly." {
		t.Errorf("after delete: %q", got)
	}
	page = b.follow("delete-schedule", b.post("delete-schedule", url.Values{"q": {q.Name()}, "schedule": {"nightly"}}))
	if got := stat(t, page, "flash"); got != "There was no schedule nightly to delete." {
		t.Errorf("after deleting it again: %q", got)
	}
}
