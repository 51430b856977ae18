package main

// The attacks of issue 16 in the abuse scenario (abuseCases lists them with issue 8's;
// runAttack runs both): requests whose cost is CPU and memory rather than connections or
// DynamoDB calls, each judged by the CPU-seconds and RSS growth of one request.
//
//   - Provider callbacks, without a token: Twilio's signature check builds its string by
//     appending each form field to the URL (quadratic in the fields; a long query string
//     makes every append longer), so the cost comes before the 401. A ~1 MiB form of
//     10,000 fields, a ~960 KiB query string with the form Twilio sends (only a bound on
//     the query can make it cheap), and a ~1 MiB SendGrid batch signed with a key the
//     gateway does not know.
//   - Liquid ranges, with a service token (a tenant's own templates): bounds next to the
//     int64 limit (made an array whose counter overflows: it never ends), 20,000,000
//     integers (an array before any budget), and a bound from the send's data of
//     9,223,372,036,854,775,807; PUT alone, then a send that renders them (Pin renders a
//     send's template before its 202).
//   - Locale amplification: a send to 40 users who each asked for their own private-use
//     locale (en-x-…) of a template whose parts are near their 64 KiB limit, stored for
//     the default locale and de: every requested locale is parsed, cached and rendered
//     on its own when it should resolve to the stored version that serves it.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/inboxgw/gateway/inbox"
)

const (
	// abusePublicURL is the gateway's INBOX_PUBLIC_URL in the scenario: Twilio's
	// signature covers it (no request is ever sent to it).
	abusePublicURL = "https://inbox.example.com"
	twilioPath     = "/v1/webhooks/provider/twilio"
	sendgridPath   = "/v1/webhooks/provider/sendgrid"
	// callbackBodyBytes is a hostile callback body: just under the callback routes'
	// 1 MiB limit (rest.MaxCallbackBytes), which is all that bounds it today.
	callbackBodyBytes = 1<<20 - 1024
	// callbackQueryBytes is a hostile callback's query string: under net/http's 1 MiB
	// limit of a request's head.
	callbackQueryBytes = 960 << 10
	// twilioMaxFields is the most fields of a hostile form: net/url parses at most 10,000
	// parameters (GODEBUG urlmaxqueryparams), and twilio-go's check returns false at once
	// on a form it cannot parse.
	twilioMaxFields = 10_000
	// The Liquid range bombs. A filter that takes an array (join) turns its range into
	// one (osteele/liquid's Range.AsArray) before the filter, so before any budget: up to
	// the int64 limit the counter overflows and the array grows for ever; 20,000,000
	// integers are a few hundred MiB; so are abuseHugeN from data. (A loop iterates a
	// range without an array, and its iterations are counted.)
	rangeInt64 = `{{ (9223372036854775806..9223372036854775807) | join: "," }}`
	range20M   = `{{ (1..20000000) | join: "," }}`
	rangeData  = `{{ (1..n) | join: "," }}`
	abuseHugeN = "9223372036854775807"
	// localeRecipients are the users of the locale attack, each with a locale of its own.
	localeRecipients = 40
	// localePartBytes is each large part of the locale attack's template: under the
	// 64 KiB limit of a part (two of them: a version holds at most 192 KiB).
	localePartBytes = 64<<10 - 256
)

// Template ids of the attacks (one per attack: a fresh gateway reads what was PUT).
const (
	tplInt64   = "abuse-range-int64"
	tpl20M     = "abuse-range-20m"
	tplData    = "abuse-range-data"
	tplLocales = "abuse-locales"
)

// callbackSecrets are the provider callbacks' settings of the scenario's gateway, and the
// key that signs the forged SendGrid callbacks (one the gateway does not know: its
// signature is well-formed and checked in full, and does not verify).
type callbackSecrets struct {
	twilioToken string
	sendgridKey string // INBOX_SENDGRID_WEBHOOK_KEY: base64 of the DER public key
	forger      *ecdsa.PrivateKey
}

func newCallbackSecrets() (callbackSecrets, error) {
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	gwKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return callbackSecrets{}, err
	}
	der, err := x509.MarshalPKIXPublicKey(&gwKey.PublicKey)
	if err != nil {
		return callbackSecrets{}, err
	}
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return callbackSecrets{}, err
	}
	return callbackSecrets{twilioToken: hex.EncodeToString(tok), sendgridKey: base64.StdEncoding.EncodeToString(der), forger: forger}, nil
}

// env is the gateway's settings that turn both callback routes on.
func (s callbackSecrets) env() []string {
	return []string{"INBOX_TWILIO_AUTH_TOKEN=" + s.twilioToken, "INBOX_PUBLIC_URL=" + abusePublicURL,
		"INBOX_SENDGRID_WEBHOOK_KEY=" + s.sendgridKey}
}

// twilioForm is a Twilio status callback's form (the fields Twilio sends), padded to size
// bytes with extra fields, as many as fit up to what net/url parses (twilioMaxFields in
// all: with more, the signature check gives up before its work), each as long as size
// makes them; none when size is 0 (a real callback).
func twilioForm(size int) string {
	var b strings.Builder
	b.WriteString("AccountSid=AC00000000000000000000000000000000&ApiVersion=2010-04-01&From=%2B15005550006" +
		"&MessageSid=SM00000000000000000000000000000000&MessageStatus=delivered&SmsSid=SM00000000000000000000000000000000" +
		"&SmsStatus=delivered&To=%2B15005550009")
	if size == 0 {
		return b.String()
	}
	const field = len("&f000000=") // and a value of at least a byte
	extra := min(twilioMaxFields-strings.Count(b.String(), "&")-1, (size-b.Len())/(field+1))
	value := strings.Repeat("v", (size-b.Len())/extra-field)
	for i := range extra {
		fmt.Fprintf(&b, "&f%06d=%s", i, value)
	}
	return b.String()
}

// twilioURL is the path and query of a Twilio callback as the SMS adapter asks for it
// (a delivery ref and the send time), padded with extra parameters to queryBytes bytes
// of query (none when 0).
func twilioURL(queryBytes int) string {
	ref := inbox.DeliveryRef{TenantID: tenant, NotificationID: "01J0000000000000000000ABUS", Key: inbox.ChannelSMS}
	var q strings.Builder
	fmt.Fprintf(&q, "ref=%s&ts=%d", ref, time.Now().Unix())
	for i := 0; q.Len()+10 <= queryBytes; i++ {
		fmt.Fprintf(&q, "&q%06d=1", i)
	}
	return twilioPath + "?" + q.String()
}

// twilioSignature is a well-formed X-Twilio-Signature (base64 of 20 bytes, as HMAC-SHA1
// gives) that does not verify.
func twilioSignature() map[string]string {
	sig := make([]byte, 20)
	_, _ = rand.Read(sig)
	return map[string]string{"X-Twilio-Signature": base64.StdEncoding.EncodeToString(sig)}
}

// sendgridBatch is a SendGrid event batch of size bytes at most: delivered events.
func sendgridBatch(size int) string {
	var b strings.Builder
	b.WriteByte('[')
	ts := time.Now().Unix()
	for i := 0; ; i++ {
		ev := fmt.Sprintf(`{"email":"user%d@example.com","event":"delivered","timestamp":%d,"sg_message_id":"m%d","inbox_ref":"r%d"}`, i, ts, i, i)
		if b.Len()+len(ev)+2 > size {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(ev)
	}
	b.WriteByte(']')
	return b.String()
}

// sendgridSignature signs body as SendGrid does (ECDSA P-256 over SHA-256 of the
// timestamp followed by the body), with the forger's key, at the time the spec is made.
func (s callbackSecrets) sendgridSignature(body string) func() map[string]string {
	return func() map[string]string {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sum := sha256.Sum256([]byte(ts + body))
		sig, err := ecdsa.SignASN1(rand.Reader, s.forger, sum[:])
		if err != nil {
			panic(err) // crypto/rand does not fail
		}
		return map[string]string{eventwebhook.VerificationHTTPHeader: base64.StdEncoding.EncodeToString(sig),
			eventwebhook.TimestampHTTPHeader: ts}
	}
}

// templateBody is a PUT /v1/templates body: body as the in-app body and, when emailText
// is set, an email whose text part it is.
func templateBody(locale, body, emailText string) string {
	in := map[string]any{"locale": locale, "title": "abuse", "body": body}
	if emailText != "" {
		in["email"] = map[string]string{"subject": "abuse", "text": emailText}
	}
	b, _ := json.Marshal(in)
	return string(b)
}

// sendBody is a POST /v1/notifications body: template to recipients with data.
func sendBody(tpl string, recipients []string, data string) string {
	b, _ := json.Marshal(map[string]any{"recipients": recipients, "type": "abuse", "template": tpl, "data": json.RawMessage(data)})
	return string(b)
}

// putTemplates is a setup that PUTs bodies as versions of template id; it reports the
// answers (a PUT refused is what a fixed gateway answers to a range bomb).
func putTemplates(id string, bodies ...string) func(context.Context, *childGateway) (string, error) {
	return func(ctx context.Context, gw *childGateway) (string, error) {
		out, _, err := putAll(ctx, gw, id, bodies)
		return out, err
	}
}

// putAll PUTs bodies as versions of template id: the answers, and whether all were 200.
func putAll(ctx context.Context, gw *childGateway, id string, bodies []string) (string, bool, error) {
	var out []string
	all := true
	for _, body := range bodies {
		status, code, err := gw.rest(ctx, http.MethodPut, "/v1/templates/"+id, body)
		if err != nil {
			return strings.Join(out, "; "), false, err
		}
		all = all && status == http.StatusOK
		out = append(out, strings.TrimSpace(fmt.Sprintf("PUT %s %d %s", id, status, code)))
	}
	return strings.Join(out, "; "), all, nil
}

// localeUsers are the locale attack's recipients.
func localeUsers() []string {
	users := make([]string, localeRecipients)
	for i := range users {
		users[i] = fmt.Sprintf("abuse-locale-%02d", i)
	}
	return users
}

// localePart is a large template part: {{ e }} and 57 dots, repeated (the send's data makes e empty,
// so a render writes the dots), costly to parse, cheap to render.
func localePart() string {
	unit := "{{ e }}" + strings.Repeat(".", 57) // 64 bytes: about 1,000 outputs, within tmpl.MaxMarkups
	return strings.Repeat(unit, localePartBytes/len(unit))
}

// localeSetup stores the locale attack's template for en (the default: the first
// locale stored) and de, and gives each recipient a private-use locale of its own
// (en-x-a00, en-x-a01, ...) through PUT /v1/users/{id}. Any refusal is an error: the
// attack needs all of it.
func localeSetup(ctx context.Context, gw *childGateway) (string, error) {
	part := localePart()
	out, ok, err := putAll(ctx, gw, tplLocales, []string{templateBody("en", part, part), templateBody("de", part, part)})
	if err != nil {
		return out, err
	}
	if !ok {
		return out, fmt.Errorf("the template was refused: %s", out)
	}
	for i, u := range localeUsers() {
		body := fmt.Sprintf(`{"locale":"en-x-a%02d"}`, i)
		status, code, err := gw.rest(ctx, http.MethodPut, "/v1/users/"+u, body)
		if err != nil {
			return out, err
		}
		if status != http.StatusOK {
			return out, fmt.Errorf("PUT /v1/users/%s: %d %s", u, status, code)
		}
	}
	return fmt.Sprintf("%s; %d users' locales set (en-x-a00…)", out, localeRecipients), nil
}

// rest sends one REST request with the service token; it answers the status and the
// problem's code ("" when the answer has none).
func (g *childGateway) rest(ctx context.Context, method, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.serviceTok)
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var problem struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &problem)
	return resp.StatusCode, problem.Code, nil
}
