package providerhook_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/providerhook"
	"github.com/inboxgw/gateway/providerhook/providerhooktest"
)

// manyFields is a form of about bodyBytes bytes in fields of about fieldBytes bytes each
// (f0=xxx&f1=xxx&...).
func manyFields(bodyBytes, fieldBytes int) url.Values {
	form := url.Values{}
	n := 0
	for i := 0; n < bodyBytes; i++ {
		k := "f" + strconv.Itoa(i)
		v := strings.Repeat("x", max(fieldBytes-len(k)-2, 0))
		form.Set(k, v)
		n += len(k) + len(v) + 2
	}
	return form
}

// twilioRequest is a Twilio callback of form for ref, sent now, whose query is padded
// with a pad parameter to about queryBytes bytes (0: none); signed validly when sign,
// else with a bogus signature.
func twilioRequest(form url.Values, queryBytes int, sign bool) (*http.Request, []byte) {
	path := "/v1/webhooks/provider/twilio?ref=" + ref.String() + "&ts=" + strconv.FormatInt(time.Now().Unix(), 10)
	if pad := queryBytes - len(path[strings.IndexByte(path, '?')+1:]) - len("&pad="); pad > 0 {
		path += "&pad=" + strings.Repeat("p", pad)
	}
	body := form.Encode()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sig := "bm90LWEtc2lnbmF0dXJlLWF0LWFsbA=="
	if sign {
		sig = providerhooktest.TwilioSignature(authToken, publicURL+path, form)
	}
	r.Header.Set(providerhook.TwilioSignatureHeader, sig)
	return r, []byte(body)
}

// Every callback over its provider's limits is refused with the limit's code whether
// its signature is bogus or genuine: the limits are checked before the signature is
// (a bogus signature checked first would answer UNAUTHENTICATED). The variants include
// the attack's own (1 MiB in ~9,900 fields, a 512 KiB query), which cost ~9 CPU-seconds
// each when the signature was checked first; refused, each costs a pass over its bytes.
func TestCallbackLimitsAreCheckedBeforeTheSignature(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tw := newTwilio(t, now)
	key, err := providerhooktest.NewSendGridKey()
	if err != nil {
		t.Fatal(err)
	}
	sg, err := providerhook.NewSendGrid(providerhook.SendGridConfig{PublicKey: key.Public, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	status := statusForm("delivered")
	withFields := func(n int) url.Values {
		f := statusForm("delivered")
		for i := len(f); i < n; i++ {
			f.Set("X"+strconv.Itoa(i), "")
		}
		return f
	}
	for _, c := range []struct {
		name       string
		form       url.Values
		queryBytes int
		want       string
	}{
		{"body one byte over 16 KiB", manyFields(providerhook.TwilioMaxBodyBytes+1, 4096), 0, inbox.CodePayloadTooLarge},
		{"body 1 MiB in 9,900 fields", manyFields(1<<20, 106), 0, inbox.CodePayloadTooLarge},
		{"body 1 MiB in one field", manyFields(1<<20, 1<<20), 0, inbox.CodePayloadTooLarge},
		{"65 fields", withFields(providerhook.TwilioMaxFields + 1), 0, inbox.CodeBadRequest},
		{"5,000 fields in 16 KiB", manyFields(15<<10, 3), 0, inbox.CodeBadRequest},
		{"query one byte over 2 KiB", status, providerhook.MaxQueryBytes + 1, inbox.CodeBadRequest},
		{"query 512 KiB", status, 512 << 10, inbox.CodeBadRequest},
		{"query 512 KiB and 1 MiB in 9,900 fields", manyFields(1<<20, 106), 512 << 10, inbox.CodeBadRequest},
	} {
		for _, sign := range []bool{false, true} {
			r, body := twilioRequest(c.form, c.queryBytes, sign)
			start := time.Now()
			evs, err := tw.Events(r, body)
			if got := inbox.ErrorCode(err); got != c.want || evs != nil {
				t.Errorf("twilio %s (signed %v): %v %+v, want %s", c.name, sign, err, evs, c.want)
			}
			// Loose: a refusal is a pass over the bytes (microseconds); the signature
			// check it comes before took seconds on the largest variants.
			if d := time.Since(start); d > time.Second {
				t.Errorf("twilio %s (signed %v): refused after %v", c.name, sign, d)
			}
		}
	}
	// A declared length over the limit is refused on its own (the REST guard's check
	// before it reads the body).
	r, body := twilioRequest(status, 0, true)
	r.ContentLength = providerhook.TwilioMaxBodyBytes + 1
	if _, err := tw.Events(r, body); inbox.ErrorCode(err) != inbox.CodePayloadTooLarge {
		t.Errorf("twilio declared length over the limit: %v", err)
	}
	if err := tw.Limits().CheckRequest(r); inbox.ErrorCode(err) != inbox.CodePayloadTooLarge {
		t.Errorf("twilio CheckRequest, declared length over the limit: %v", err)
	}

	// SendGrid: the body's bytes and the query, signed or not; a signature header too
	// long to be one is refused before it is decoded.
	sgPost := func(query string, body []byte, sign bool, sigOverride string) (*http.Request, []byte) {
		sig, ts, err := key.Sign(body, now)
		if err != nil {
			t.Fatal(err)
		}
		if !sign {
			sig = "MEUCIQDbogus"
		}
		if sigOverride != "" {
			sig = sigOverride
		}
		r := sendGridRequest(body, sig, ts)
		r.URL.RawQuery = query
		return r, body
	}
	bigBatch := []byte("[" + strings.Repeat(`{"event":"processed","email":"a@example.com"},`, providerhook.MaxBodyBytes/40) + "{}]")
	small := []byte(`[{"event":"processed"}]`)
	for _, c := range []struct {
		name  string
		query string
		body  []byte
		sig   string
		want  string
	}{
		{"body over 1 MiB", "", bigBatch, "", inbox.CodePayloadTooLarge},
		{"query one byte over 2 KiB", strings.Repeat("q", providerhook.MaxQueryBytes+1), small, "", inbox.CodeBadRequest},
		{"query 512 KiB", strings.Repeat("q", 512<<10), small, "", inbox.CodeBadRequest},
		{"signature header of 512 KiB", "", small, strings.Repeat("A", 512<<10), inbox.CodeUnauthenticated},
	} {
		for _, sign := range []bool{false, true} {
			r, body := sgPost(c.query, c.body, sign, c.sig)
			start := time.Now()
			evs, err := sg.Events(r, body)
			if got := inbox.ErrorCode(err); got != c.want || evs != nil {
				t.Errorf("sendgrid %s (signed %v): %v %+v, want %s", c.name, sign, err, evs, c.want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("sendgrid %s (signed %v): refused after %v", c.name, sign, d)
			}
		}
	}
	// A form's field count is not SendGrid's: a JSON batch with many "&" is read.
	amp := []byte(`[{"event":"processed","reason":"` + strings.Repeat("&", 10*providerhook.TwilioMaxFields) + `"}]`)
	if _, err := sg.Events(sgPost("", amp, true, "")); err != nil {
		t.Errorf("sendgrid batch with many '&': %v", err)
	}
}

// A genuine callback at every limit at once verifies: 64 fields in exactly 16 KiB, a
// query of exactly 2 KiB (Twilio signs whatever query the callback URL has).
func TestTwilioCallbackAtTheLimitsVerifies(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tw := newTwilio(t, now)
	form := statusForm("delivered")
	for i := len(form); i < providerhook.TwilioMaxFields; i++ {
		form.Set("Extra"+strconv.Itoa(i), "")
	}
	// Fill the last field up to exactly TwilioMaxBodyBytes.
	pad := "Extra" + strconv.Itoa(providerhook.TwilioMaxFields-1)
	form.Set(pad, strings.Repeat("y", providerhook.TwilioMaxBodyBytes-len(form.Encode())))
	r, body := twilioRequest(form, providerhook.MaxQueryBytes, true)
	if len(body) != providerhook.TwilioMaxBodyBytes || len(r.URL.RawQuery) != providerhook.MaxQueryBytes || len(form) != providerhook.TwilioMaxFields {
		t.Fatalf("fixture: body %d bytes, query %d bytes, %d fields", len(body), len(r.URL.RawQuery), len(form))
	}
	evs, err := tw.Events(r, body)
	if err != nil || len(evs) != 1 || evs[0].Status != inbox.DeliveryDelivered {
		t.Fatalf("callback at the limits: %v %+v", err, evs)
	}
	// One byte, one field or one query byte more is refused.
	for name, mutate := range map[string]func(url.Values) int{
		"a byte more":       func(f url.Values) int { f.Set(pad, f.Get(pad)+"y"); return 0 },
		"a field more":      func(f url.Values) int { f.Set(pad, f.Get(pad)[3:]); f.Set("Z", ""); return 0 },
		"a query byte more": func(url.Values) int { return 1 },
	} {
		f := url.Values{}
		for k, v := range form {
			f[k] = append([]string(nil), v...)
		}
		extra := mutate(f)
		r, body := twilioRequest(f, providerhook.MaxQueryBytes+extra, true)
		if _, err := tw.Events(r, body); err == nil || inbox.ErrorCode(err) == inbox.CodeUnauthenticated {
			t.Errorf("%s: %v, want a limit's refusal", name, err)
		}
	}
}

// BenchmarkTwilioHostileCallback is the cost of one unauthenticated Twilio callback with a
// bogus signature: 1 MiB in about 9,900 fields (net/url parses at most 10,000), or 64 KiB
// in 8-byte fields behind a 512 KiB query string (under net/http's 1 MB of headers). Before
// the limits, each cost about 9 CPU-seconds in twilio-go's signature check; now each is
// refused before it. The last case is the most a callback within the limits costs: it
// reaches the signature check.
//
//	go test ./providerhook/ -run '^$' -bench TwilioHostile -benchtime 1x -benchmem
func BenchmarkTwilioHostileCallback(b *testing.B) {
	for _, c := range []struct {
		name             string
		body, field, qry int
	}{
		{"1MiB-body-9900-fields", 1 << 20, 106, 0},
		{"64KiB-body-512KiB-query", 64 << 10, 8, 512 << 10},
		{"at-the-limits-16KiB-64-fields-2KiB-query", 16 << 10, 256, 2 << 10},
	} {
		b.Run(c.name, func(b *testing.B) {
			tw := newTwilio(b, time.Now())
			r, body := twilioRequest(manyFields(c.body, c.field), c.qry, false)
			for b.Loop() {
				if _, err := tw.Events(r, body); err == nil {
					b.Fatal("a bogus signature was accepted")
				}
			}
		})
	}
}
