// Package app is the gateway's one composition root. Build composes an instance from the
// configuration (Config, LoadConfig) and what a caller hands in (Deps): DynamoDB client ->
// store -> broker -> send service, templates, broadcasts -> delivery channels ->
// scheduler -> the HTTP surface of packages httpapi and rest. serve, the worker and
// import-github commands, the tests' harness (internal/testgw) and cmd/bench all call
// Build, so tests and benchmarks run what production runs. The relay (package relay) and
// token commands stand beside it. Command inbox-gateway (the module root) calls Run.
//
//	go run . [serve]                          the gateway (configuration from INBOX_* variables)
//	go run . token --user U [--tenant T] [--scope S] [--ttl D]
//	go run . import-github FILE [--tenant T]  GitHub webhook examples as notifications
//	go run . relay                            the DynamoDB Streams relay (INBOX_BROKER=redis)
//	go run . help                             usage (also -h, --help)
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	_ "time/tzdata" // preference time zones (time.LoadLocation) without the host's zoneinfo

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/caarlos0/env/v11"

	"github.com/inboxgw/gateway/auth"
	"github.com/inboxgw/gateway/dynlocal"
	"github.com/inboxgw/gateway/httpapi"
	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/live"
	"github.com/inboxgw/gateway/metrics"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/telemetry"
)

// Config is the gateway's configuration, read from the environment (see README.md).
type Config struct {
	Addr  string `env:"INBOX_ADDR" envDefault:":8080"`
	Table string `env:"INBOX_TABLE" envDefault:"inbox"`
	// Store is "local" (DynamoDB Local as a child process) or "dynamodb" (AWS configuration).
	Store         string `env:"INBOX_STORE" envDefault:"local"`
	DynamoDBLocal string `env:"INBOX_DYNAMODB_LOCAL"`
	// DataDir keeps DynamoDB Local's data; ":memory:" for a throwaway run.
	DataDir string `env:"INBOX_DATA_DIR" envDefault:".data"`
	// CreateTable defaults to on for local and off for dynamodb.
	CreateTable *bool `env:"INBOX_CREATE_TABLE"`
	Dev         bool  `env:"INBOX_DEV"`
	// DemoImport, when set, imports this GitHub webhook examples file at start.
	DemoImport  string `env:"INBOX_DEMO_IMPORT"`
	DemoTenant  string `env:"INBOX_DEMO_TENANT" envDefault:"default"`
	JWTSecret   string `env:"INBOX_JWT_SECRET"`
	JWTIssuer   string `env:"INBOX_JWT_ISSUER"`
	JWTAudience string `env:"INBOX_JWT_AUDIENCE"`
	// JWKSURL, when set, is the JSON Web Key Set whose keys verify RS256 and ES256 tokens
	// (https, or http for a loopback host); with it INBOX_JWT_SECRET may be unset (then
	// INBOX_CURSOR_SECRET is required, and only the JWKS's tokens are accepted).
	JWKSURL string `env:"INBOX_JWKS_URL"`
	// JWKSRefresh is how often the key set is fetched in the background (10s..24h); a
	// token with an unknown kid fetches it sooner (at most every auth.DefaultJWKSMinRefresh).
	JWKSRefresh time.Duration `env:"INBOX_JWKS_REFRESH" envDefault:"15m"`
	// CursorSecret signs inbox cursors (at least 32 bytes, the same on every instance);
	// unset, the key is derived from the JWT secret (store.DeriveCursorKey).
	CursorSecret string `env:"INBOX_CURSOR_SECRET"`
	// AllowedOrigins are the Origins WebSocket upgrades accept besides the same origin:
	// host patterns ("app.example.com", "*.example.com") or scheme://host patterns.
	AllowedOrigins []string `env:"INBOX_ALLOWED_ORIGINS" envSeparator:","`
	// WSInitTimeout is how long a WebSocket may wait before connection_init (then 4408).
	WSInitTimeout time.Duration `env:"INBOX_WS_INIT_TIMEOUT" envDefault:"10s"`
	// KeepAlive is the interval of keep-alive messages: graphql-transport-ws "ping",
	// graphql-ws "ka" and SSE ": ping" comments. A WebSocket peer not heard from for two
	// intervals, or an SSE write stalled that long (at most 10 s), ends its connection.
	KeepAlive time.Duration `env:"INBOX_KEEPALIVE" envDefault:"15s"`
	LogFormat string        `env:"INBOX_LOG_FORMAT"`
	// ComplexityLimit bounds a document's cost (httpapi.Complexity): every field that
	// reads DynamoDB on its own costs 100, aliases included, and a list multiplies its
	// children's cost by first/last/ids.
	ComplexityLimit int `env:"INBOX_COMPLEXITY_LIMIT" envDefault:"5000"`
	// MaxMutations bounds the mutation fields of one document, aliases included (1..100).
	MaxMutations int `env:"INBOX_MAX_MUTATION_FIELDS" envDefault:"5"`
	// AnonymousConcurrency bounds the GraphQL requests without a token that run at once
	// (1..1000); more wait up to 5 s for a slot, then get 429 THROTTLED.
	AnonymousConcurrency int `env:"INBOX_ANONYMOUS_CONCURRENCY" envDefault:"2"`
	// ProfileCacheSize > 0 shares up to this many actor/target profiles across requests
	// for ProfileCacheTTL (off by default: every request reads its own).
	ProfileCacheSize int           `env:"INBOX_PROFILE_CACHE_SIZE" envDefault:"0"`
	ProfileCacheTTL  time.Duration `env:"INBOX_PROFILE_CACHE_TTL" envDefault:"30s"`
	// AnnouncementCacheMaxAge is how long an instance serves a tenant's cached announcement
	// set without reading it again (one Query), when no invalidation came: the backstop
	// should one be lost (the broker and the stream relay invalidate at once).
	AnnouncementCacheMaxAge time.Duration `env:"INBOX_ANNOUNCEMENT_CACHE_MAX_AGE" envDefault:"30s"`
	// Broker is "local" (in-process: one instance) or "redis" (Redis pub/sub between
	// instances and the stream relay, at RedisURL).
	Broker   string `env:"INBOX_BROKER" envDefault:"local"`
	RedisURL string `env:"INBOX_REDIS_URL" envDefault:"redis://127.0.0.1:6379/0"`
	// Scheduler runs the durable scheduler (channel deliveries, sendAt sends, broadcasts,
	// snooze wake-ups, expiries) inside serve; off, run it alone with the worker command. Instances share its shards through leases.
	Scheduler bool `env:"INBOX_SCHEDULER" envDefault:"true"`
	// SchedShards is how many write shards scheduled tasks spread over (the same on every
	// instance; it may grow, never shrink). SchedPoll is the scheduler's safety net: a
	// held shard is read at least this often (tasks run at their due time through
	// wake-ups; one whose wake-up was lost runs at most about SchedPoll + 30 s late, a
	// minute more when its minute had been read ahead: see package sched).
	SchedShards int           `env:"INBOX_SCHED_SHARDS" envDefault:"16"`
	SchedPoll   time.Duration `env:"INBOX_SCHED_POLL" envDefault:"1m"`
	// SchedLease is how long a scheduler instance's membership (which holds all its
	// shards) lasts without renewal: a crashed instance's shards are taken over within it
	// plus a heartbeat (a third of it).
	SchedLease time.Duration `env:"INBOX_SCHED_LEASE" envDefault:"30s"`
	// Retention, when > 0, is how long a notification sent without expiresAt stays in the
	// inbox (its expiry is then scheduled at send); 0 keeps notifications until deleted.
	Retention time.Duration `env:"INBOX_RETENTION" envDefault:"0s"`
	// SendRecovery is how long after its accept a send request's recovery task is due
	// (service.Options.RecoveryDelay): a request its instance did not finish (a crash) is
	// run by whichever instance holds the task's shard then. It should exceed the usual
	// processing time; a shorter one only looks again sooner.
	SendRecovery time.Duration `env:"INBOX_SEND_RECOVERY" envDefault:"10s"`
	// IdempotencyTTL is how long a send request's idempotency key is remembered: a
	// replay within it answers the first answer, another body under it is CONFLICT.
	IdempotencyTTL time.Duration `env:"INBOX_IDEMPOTENCY_TTL" envDefault:"24h"`
	// LaneTransactional and LaneBulk are the send lanes' worker counts (service.Options).
	LaneTransactional int `env:"INBOX_LANE_TRANSACTIONAL" envDefault:"16"`
	LaneBulk          int `env:"INBOX_LANE_BULK" envDefault:"4"`
	// RelayLease is how long the stream relay's lease lasts without renewal: a crashed
	// relay's successor takes over within it.
	RelayLease time.Duration `env:"INBOX_RELAY_LEASE" envDefault:"10s"`
	// MetricsAddr is where GET /metrics (Prometheus) is served: "" on the gateway's own
	// listener (no token, as Prometheus scrapes), an address (":9090") on a separate
	// listener of its own (keep it internal), "off" nowhere.
	MetricsAddr string `env:"INBOX_METRICS_ADDR"`
	// Limits (issue 8): see httpapi/limits*.go.
	// Introspection is "on" to allow introspection and validation suggestions outside dev
	// mode (INBOX_DEV allows them too).
	Introspection   string `env:"INBOX_INTROSPECTION"`
	QueryCacheBytes int    `env:"INBOX_QUERY_CACHE_BYTES" envDefault:"16777216"`
	APQCacheBytes   int    `env:"INBOX_APQ_CACHE_BYTES" envDefault:"4194304"`
	// QueryTimeout and MutationTimeout are a query's and a mutation's deadlines.
	QueryTimeout    time.Duration `env:"INBOX_QUERY_TIMEOUT" envDefault:"10s"`
	MutationTimeout time.Duration `env:"INBOX_MUTATION_TIMEOUT" envDefault:"30s"`
	// HTTP server timeouts: headers, body (from the end of the headers), response
	// writes (SSE and WebSocket exempt), and a keep-alive connection's idle wait.
	ReadHeaderTimeout time.Duration `env:"INBOX_READ_HEADER_TIMEOUT" envDefault:"10s"`
	ReadTimeout       time.Duration `env:"INBOX_READ_TIMEOUT" envDefault:"30s"`
	WriteTimeout      time.Duration `env:"INBOX_WRITE_TIMEOUT" envDefault:"60s"`
	IdleTimeout       time.Duration `env:"INBOX_IDLE_TIMEOUT" envDefault:"120s"`
	// DefaultPreferences are every tenant's preference defaults until a user sets their
	// own: JSON of the GraphQL Preferences shape (inbox.ParseTenantPreferences); unset,
	// every channel is on. CriticalCategories cannot be opted out of.
	DefaultPreferences string   `env:"INBOX_DEFAULT_PREFERENCES"`
	CriticalCategories []string `env:"INBOX_CRITICAL_CATEGORIES" envSeparator:","`
	// Channels (issue 11; see README "Channels"). Email: SMTPURL is the provider's SMTP
	// server (smtp://user:pass@host:port, STARTTLS when offered; smtps:// for implicit
	// TLS); unset in dev mode, an in-process catcher on DevSMTPAddr receives the mail
	// (read at /dev/mail). SMTPSendGrid adds SendGrid's X-SMTPAPI header (the record ref
	// its event webhook echoes).
	SMTPURL      string `env:"INBOX_SMTP_URL"`
	EmailFrom    string `env:"INBOX_EMAIL_FROM"`
	SMTPSendGrid bool   `env:"INBOX_SMTP_SENDGRID"`
	DevSMTPAddr  string `env:"INBOX_DEV_SMTP_ADDR" envDefault:"127.0.0.1:1025"`
	// FCM: the service account's JSON key file and the API's base URL.
	FCMCredentials string `env:"INBOX_FCM_CREDENTIALS"`
	FCMURL         string `env:"INBOX_FCM_URL" envDefault:"https://fcm.googleapis.com"`
	// APNs (token auth): the .p8 key file, its key id, the team id, the app's bundle id
	// (apns-topic) and the base URL (https://api.sandbox.push.apple.com for development).
	APNsKey    string `env:"INBOX_APNS_KEY"`
	APNsKeyID  string `env:"INBOX_APNS_KEY_ID"`
	APNsTeamID string `env:"INBOX_APNS_TEAM_ID"`
	APNsTopic  string `env:"INBOX_APNS_TOPIC"`
	APNsURL    string `env:"INBOX_APNS_URL" envDefault:"https://api.push.apple.com"`
	// Twilio (SMS): the account, its auth token (also what checks Twilio's status
	// callbacks), the sending number or messaging service, the API's base URL.
	TwilioAccountSID string `env:"INBOX_TWILIO_ACCOUNT_SID"`
	TwilioAuthToken  string `env:"INBOX_TWILIO_AUTH_TOKEN"`
	TwilioFrom       string `env:"INBOX_TWILIO_FROM"`
	TwilioURL        string `env:"INBOX_TWILIO_URL" envDefault:"https://api.twilio.com"`
	// ChannelConfigs are the settings of the channels configured in app/channels.go,
	// each with its variables and their help.
	ChannelConfigs
	// SendGridWebhookKey is the event webhook's verification key (base64 DER ECDSA public
	// key); unset, SendGrid callbacks are refused. Provider callbacks: POST
	// /v1/webhooks/provider/{name}, see providerHooks.
	SendGridWebhookKey string `env:"INBOX_SENDGRID_WEBHOOK_KEY"`
	// PublicURL is the gateway's URL as providers reach it (Twilio's StatusCallback and
	// its signature check); unset, no status callback is asked for.
	PublicURL string `env:"INBOX_PUBLIC_URL"`
	// UnsubscribeSecret signs the one-click unsubscribe links of emails (RFC 8058; at
	// least 32 bytes), which go under PublicURL; unset outside dev mode, emails carry
	// none.
	UnsubscribeSecret string `env:"INBOX_UNSUBSCRIBE_SECRET"`
	// CallbackMaxAge is how old a signed provider callback may be (SendGrid's timestamp).
	CallbackMaxAge time.Duration `env:"INBOX_CALLBACK_MAX_AGE" envDefault:"10m"`
	// Sends per second per instance and provider kind (channel.Limit).
	RateEmail   float64 `env:"INBOX_RATE_EMAIL" envDefault:"100"`
	RatePush    float64 `env:"INBOX_RATE_PUSH" envDefault:"500"`
	RateSMS     float64 `env:"INBOX_RATE_SMS" envDefault:"10"`
	RateWebhook float64 `env:"INBOX_RATE_WEBHOOK" envDefault:"100"`
	// DeliveryAttempts bounds the sends of one delivery record; DeliveryBackoff is the
	// retry delay's base (exponential, full jitter); DeliveryTimeout one send's deadline.
	DeliveryAttempts int           `env:"INBOX_DELIVERY_ATTEMPTS" envDefault:"6"`
	DeliveryBackoff  time.Duration `env:"INBOX_DELIVERY_BACKOFF" envDefault:"30s"`
	DeliveryTimeout  time.Duration `env:"INBOX_DELIVERY_TIMEOUT" envDefault:"15s"`
	// WebhookAllowPrivate lets tenants' webhooks reach loopback, private and link-local
	// addresses (channel.WebhookConfig.PublicOnly off); dev mode always does. Off, a
	// webhook URL resolving to one fails its record (a tenant's URL is no way into the
	// gateway's own network).
	WebhookAllowPrivate bool `env:"INBOX_WEBHOOK_ALLOW_PRIVATE"`
	// TenantPreferences is DefaultPreferences and CriticalCategories parsed.
	TenantPreferences inbox.TenantPreferences `env:"-"`
}

// Bounds of the send pipeline's settings.
const (
	// MaxIdempotencyTTL bounds INBOX_IDEMPOTENCY_TTL: 366 days (a request item is kept, body
	// included, for the whole window).
	MaxIdempotencyTTL = 366 * 24 * time.Hour
	// MaxLaneWorkers bounds INBOX_LANE_TRANSACTIONAL and INBOX_LANE_BULK.
	MaxLaneWorkers = 1024
)

// checkLimits bounds the limit settings.
func (c Config) checkLimits() error {
	if c.Introspection != "" && c.Introspection != "on" && c.Introspection != "off" {
		return fmt.Errorf("configuration: INBOX_INTROSPECTION must be on or off, not %q", c.Introspection)
	}
	if c.QueryCacheBytes < 1<<20 || c.QueryCacheBytes > 1<<30 {
		return fmt.Errorf("configuration: INBOX_QUERY_CACHE_BYTES must be between 1 MiB and 1 GiB, not %d", c.QueryCacheBytes)
	}
	if c.APQCacheBytes < 64<<10 || c.APQCacheBytes > 1<<30 {
		return fmt.Errorf("configuration: INBOX_APQ_CACHE_BYTES must be between 64 KiB and 1 GiB, not %d", c.APQCacheBytes)
	}
	return checkDurations([]durationBound{
		{"INBOX_QUERY_TIMEOUT", c.QueryTimeout, 100 * time.Millisecond, 10 * time.Minute},
		{"INBOX_MUTATION_TIMEOUT", c.MutationTimeout, 100 * time.Millisecond, 10 * time.Minute},
		{"INBOX_READ_HEADER_TIMEOUT", c.ReadHeaderTimeout, 100 * time.Millisecond, 10 * time.Minute},
		{"INBOX_READ_TIMEOUT", c.ReadTimeout, 100 * time.Millisecond, 10 * time.Minute},
		{"INBOX_WRITE_TIMEOUT", c.WriteTimeout, 100 * time.Millisecond, 10 * time.Minute},
		{"INBOX_IDLE_TIMEOUT", c.IdleTimeout, 100 * time.Millisecond, time.Hour},
	})
}

// durationBound is a duration setting (name: its variable) and its bounds, inclusive.
type durationBound struct {
	name     string
	v        time.Duration
	min, max time.Duration
}

// checkDurations returns an error naming the first setting of ds outside its bounds.
func checkDurations(ds []durationBound) error {
	for _, d := range ds {
		if d.v < d.min || d.v > d.max {
			return fmt.Errorf("configuration: %s must be between %v and %v, not %v", d.name, d.min, d.max, d.v)
		}
	}
	return nil
}

// LoadConfig reads the configuration from the INBOX_* environment variables (defaults in
// Config's tags) and checks every bound; the error names the variable.
func LoadConfig() (Config, error) {
	var c Config
	if err := env.Parse(&c); err != nil {
		return c, fmt.Errorf("configuration: %w", err)
	}
	if c.Store != "local" && c.Store != "dynamodb" {
		return c, fmt.Errorf("configuration: INBOX_STORE must be local or dynamodb, not %q", c.Store)
	}
	if c.Broker != "local" && c.Broker != "redis" {
		return c, fmt.Errorf("configuration: INBOX_BROKER must be local or redis, not %q", c.Broker)
	}
	if c.ComplexityLimit < 1 {
		// Every document costs at least 1: a limit below 1 would refuse them all.
		return c, fmt.Errorf("configuration: INBOX_COMPLEXITY_LIMIT must be at least 1, not %d", c.ComplexityLimit)
	}
	if c.AnonymousConcurrency < 1 || c.AnonymousConcurrency > 1000 {
		return c, fmt.Errorf("configuration: INBOX_ANONYMOUS_CONCURRENCY must be between 1 and 1000, not %d", c.AnonymousConcurrency)
	}
	if c.MaxMutations < 1 || c.MaxMutations > 100 {
		return c, fmt.Errorf("configuration: INBOX_MAX_MUTATION_FIELDS must be between 1 and 100, not %d", c.MaxMutations)
	}
	if c.KeepAlive < time.Second || c.KeepAlive > 10*time.Minute {
		return c, fmt.Errorf("configuration: INBOX_KEEPALIVE must be between 1s and 10m, not %v", c.KeepAlive)
	}
	if c.JWKSRefresh < 10*time.Second || c.JWKSRefresh > 24*time.Hour {
		return c, fmt.Errorf("configuration: INBOX_JWKS_REFRESH must be between 10s and 24h, not %v", c.JWKSRefresh)
	}
	// The send pipeline: 0 or a negative count would silently fall back to the service's
	// default, and a zero window would forget keys at once; refuse them at start instead.
	if c.IdempotencyTTL < time.Minute || c.IdempotencyTTL > MaxIdempotencyTTL {
		return c, fmt.Errorf("configuration: INBOX_IDEMPOTENCY_TTL must be between 1m and %v, not %v", MaxIdempotencyTTL, c.IdempotencyTTL)
	}
	if c.SendRecovery < 100*time.Millisecond || c.SendRecovery > time.Hour {
		return c, fmt.Errorf("configuration: INBOX_SEND_RECOVERY must be between 100ms and 1h, not %v", c.SendRecovery)
	}
	if c.LaneTransactional < 1 || c.LaneTransactional > MaxLaneWorkers {
		return c, fmt.Errorf("configuration: INBOX_LANE_TRANSACTIONAL must be between 1 and %d, not %d", MaxLaneWorkers, c.LaneTransactional)
	}
	if c.LaneBulk < 1 || c.LaneBulk > MaxLaneWorkers {
		return c, fmt.Errorf("configuration: INBOX_LANE_BULK must be between 1 and %d, not %d", MaxLaneWorkers, c.LaneBulk)
	}
	if c.CursorSecret != "" && len(c.CursorSecret) < 32 {
		return c, fmt.Errorf("configuration: INBOX_CURSOR_SECRET must be at least 32 bytes, not %d", len(c.CursorSecret))
	}
	if c.WSInitTimeout < 100*time.Millisecond {
		return c, fmt.Errorf("configuration: INBOX_WS_INIT_TIMEOUT must be at least 100ms, not %v", c.WSInitTimeout)
	}
	if err := c.checkLimits(); err != nil {
		return c, err
	}
	if err := c.checkChannels(); err != nil {
		return c, err
	}
	if _, err := providerHooks(c); err != nil {
		return c, fmt.Errorf("configuration: %w", err)
	}
	prefs, err := inbox.ParseTenantPreferences(c.DefaultPreferences, c.CriticalCategories)
	if err != nil {
		return c, fmt.Errorf("configuration: INBOX_DEFAULT_PREFERENCES / INBOX_CRITICAL_CATEGORIES: %w", err)
	}
	c.TenantPreferences = prefs
	if c.CreateTable == nil {
		on := c.Store == "local"
		c.CreateTable = &on
	}
	return c, nil
}

// Run runs the command args name (serve when args is empty or starts with a flag) until
// ctx ends; its output (a token, an import summary) goes to os.Stdout, its log to stderr.
// "help", "-h" and "--help" print Usage and return nil, before the configuration is read.
func Run(ctx context.Context, args []string) error {
	if isHelp(args) {
		Usage(os.Stdout)
		return nil
	}
	cfg, err := LoadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	err = runCommand(ctx, cfg, log, cmd, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the command's flags printed their usage (token -h)
	}
	return err
}

// runCommand runs the command cmd with its args.
func runCommand(ctx context.Context, cfg Config, log *slog.Logger, cmd string, args []string) error {
	switch cmd {
	case "serve":
		return serve(ctx, cfg, log)
	case "token":
		return tokenCommand(cfg, args, os.Stdout)
	case "import-github":
		return importCommand(ctx, cfg, log, args, os.Stdout)
	case "relay":
		return relayCommand(ctx, cfg, log)
	case "worker":
		return workerCommand(ctx, cfg, log)
	case "model":
		return modelCommand(ctx, cfg, log, args, os.Stdout)
	default:
		return fmt.Errorf("unknown command %q (want serve, relay, worker, token, import-github, model or help)", cmd)
	}
}

// newLogger is the process's logger: JSON (text in dev mode, or by INBOX_LOG_FORMAT) on
// stderr, every line logged with a traced context carrying trace_id and span_id.
func newLogger(cfg Config) *slog.Logger {
	if cfg.LogFormat == "json" || (cfg.LogFormat == "" && !cfg.Dev) {
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, nil)))
	}
	return slog.New(telemetry.LogHandler(slog.NewTextHandler(os.Stderr, nil)))
}

// errNoJWTSecret is jwtSecret's answer outside dev mode without INBOX_JWT_SECRET.
var errNoJWTSecret = errors.New("INBOX_JWT_SECRET is required (at least 32 bytes), or INBOX_JWKS_URL; or set INBOX_DEV=1 for a development secret")

// jwtSecret returns the HMAC secret: INBOX_JWT_SECRET, or in dev mode a random one kept in
// the data directory so that tokens survive restarts (and `token` signs with the same).
// Outside dev mode without INBOX_JWT_SECRET it fails with errNoJWTSecret.
func jwtSecret(cfg Config) ([]byte, error) {
	if cfg.JWTSecret != "" {
		return []byte(cfg.JWTSecret), nil
	}
	if !cfg.Dev {
		return nil, errNoJWTSecret
	}
	dir := cfg.DataDir
	if dir == dynlocal.MemoryDataDir || dir == "" {
		dir = ".data"
	}
	path := filepath.Join(dir, "dev-jwt-secret")
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return nil, err
	}
	secret := []byte(hex.EncodeToString(buf))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev secret: %w", err)
	}
	if err := os.WriteFile(path, secret, 0o600); err != nil {
		return nil, fmt.Errorf("dev secret: %w", err)
	}
	return secret, nil
}

// newSigner returns a Verifier over the HS256 secret alone (the token command signs with
// it; it never fetches the JWKS).
func newSigner(cfg Config) (*auth.Verifier, error) {
	secret, err := jwtSecret(cfg)
	if err != nil {
		return nil, err
	}
	return auth.NewVerifier(auth.Config{Secret: secret, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, Leeway: 30 * time.Second})
}

// newVerifier returns the gateway's Verifier: HS256 with the secret (when there is one),
// RS256 and ES256 with INBOX_JWKS_URL's keys (when set; refreshed until Close, fetch
// failures logged to log). Without INBOX_JWT_SECRET outside dev mode, INBOX_JWKS_URL is
// required.
func newVerifier(cfg Config, log *slog.Logger) (*auth.Verifier, error) {
	secret, err := jwtSecret(cfg)
	if err != nil && (!errors.Is(err, errNoJWTSecret) || cfg.JWKSURL == "") {
		return nil, err
	}
	return auth.NewVerifier(auth.Config{
		Secret: secret, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, Leeway: 30 * time.Second,
		JWKSURL: cfg.JWKSURL, JWKSRefresh: cfg.JWKSRefresh, Log: log,
	})
}

// engine is a connected DynamoDB client and what to close when done.
type engine struct {
	db    *dynamodb.Client
	close func()
	// endpoint is DynamoDB Local's URL ("" for AWS): the stream relay reads it too.
	endpoint string
}

// endpointFile is where a running local engine's endpoint is written, so that other
// commands (import-github) reuse it instead of opening the same data directory twice.
const endpointFile = "dynamodb-local.endpoint"

// openEngine connects to DynamoDB: for "local", an already running engine of the same data
// directory or a new DynamoDB Local child process; for "dynamodb", the standard AWS
// configuration (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, the credential chain).
func openEngine(ctx context.Context, cfg Config, log *slog.Logger, optFns ...func(*dynamodb.Options)) (*engine, error) {
	optFns = append([]func(*dynamodb.Options){WithPooledHTTP()}, optFns...)
	if cfg.Store == "dynamodb" {
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("AWS configuration: %w", err)
		}
		return &engine{db: dynamodb.NewFromConfig(awsCfg, optFns...), close: func() {}}, nil
	}
	persistent := cfg.DataDir != dynlocal.MemoryDataDir && cfg.DataDir != ""
	if persistent {
		if b, err := os.ReadFile(filepath.Join(cfg.DataDir, endpointFile)); err == nil {
			ep := strings.TrimSpace(string(b))
			if answers(ctx, ep) {
				log.Info("using the running DynamoDB Local", "endpoint", ep)
				return &engine{db: LocalClient(ep, optFns...), close: func() {}, endpoint: ep}, nil
			}
		}
	}
	srv, err := dynlocal.Start(ctx, dynlocal.Options{Dir: cfg.DynamoDBLocal, DataDir: cfg.DataDir, Logger: log})
	if err != nil {
		return nil, err
	}
	epPath := filepath.Join(cfg.DataDir, endpointFile)
	if persistent {
		_ = os.WriteFile(epPath, []byte(srv.Endpoint()+"\n"), 0o600)
	}
	return &engine{db: LocalClient(srv.Endpoint(), optFns...), endpoint: srv.Endpoint(), close: func() {
		if persistent {
			_ = os.Remove(epPath)
		}
		_ = srv.Close()
	}}, nil
}

func answers(ctx context.Context, endpoint string) bool {
	if endpoint == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := LocalClient(endpoint).ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	return err == nil
}

// cursorKey returns the key inbox cursors are signed with: INBOX_CURSOR_SECRET, or a key
// derived from the JWT secret with a labelled HMAC (store.DeriveCursorKey). Either way
// every instance with the same configuration has the same key, so a cursor works behind
// a load balancer; rotating it (or the JWT secret, when it is derived) invalidates the
// cursors clients hold (BAD_USER_INPUT "invalid cursor": they start from the top).
func cursorKey(cfg Config) ([]byte, error) {
	if cfg.CursorSecret != "" {
		return []byte(cfg.CursorSecret), nil
	}
	secret, err := jwtSecret(cfg)
	if errors.Is(err, errNoJWTSecret) && cfg.JWKSURL != "" {
		return nil, errors.New("INBOX_CURSOR_SECRET is required (at least 32 bytes) when INBOX_JWKS_URL replaces INBOX_JWT_SECRET")
	}
	if err != nil {
		return nil, err
	}
	return store.DeriveCursorKey(secret), nil
}

// maxIdleConns is how many idle connections to DynamoDB the client keeps. The SDK's
// default keeps 10 per host: with more calls in flight than that (a busy gateway has a
// few per request), every call beyond the tenth closed its connection afterwards and
// the next one opened a new one (and, on AWS, paid a TLS handshake).
const maxIdleConns = 256

// WithPooledHTTP gives the client an HTTP transport that keeps maxIdleConns connections,
// and the gateway's retryer (store.NewSDKRetryer: bounded attempts and backoff, no
// client-side retry quota, which a long-running service drains in its first burst of
// faults; the store retries its own calls itself, so the two never multiply).
func WithPooledHTTP() func(*dynamodb.Options) {
	client := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = maxIdleConns
		t.MaxIdleConnsPerHost = maxIdleConns
	})
	return func(o *dynamodb.Options) {
		o.HTTPClient = client
		o.Retryer = store.NewSDKRetryer()
	}
}

// LocalClient is a DynamoDB client for DynamoDB Local: dynlocal.Client.
func LocalClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynlocal.Client(endpoint, optFns...)
}

// serve runs the gateway (Build) until ctx ends: its HTTP surface on Config.Addr and,
// with Config.Scheduler, its scheduler; then it closes subscriptions, drains requests and
// hands the scheduler's shards over.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.Dev {
		// make run: Ctrl-C interrupts the gateway alone, which exits 0, and so does make.
		defer takeForeground()()
	}
	// One metrics registry, given to what reports to it: every DynamoDB call of the
	// client (an SDK middleware), the broker's publish lag, the HTTP handler, the scheduler.
	reg := metrics.New()
	g, err := Build(ctx, cfg, Deps{Log: log, Metrics: reg})
	if err != nil {
		return err
	}
	defer g.Close()
	logChannels(log, cfg, g.Channels)
	if cfg.Scheduler {
		schedCtx, stopSched := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := g.RunScheduler(schedCtx); err != nil {
				log.Error("scheduler stopped", "err", err)
			}
		}()
		// Stopped before the gateway closes: running handlers finish first.
		defer func() { stopSched(); <-done }()
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	h := g.Handler
	srv := httpapi.NewServer(g.HTTP, httpapi.Timeouts{ReadHeader: cfg.ReadHeaderTimeout, Read: cfg.ReadTimeout, Write: cfg.WriteTimeout, Idle: cfg.IdleTimeout})
	_, stopMetrics, err := ServeMetrics(cfg, log, reg)
	if err != nil {
		_ = ln.Close() // not served yet: nothing else closes it
		return err
	}
	defer stopMetrics()
	url := "http://" + displayAddr(ln.Addr())
	log.Info("inbox gateway listening", "graphiql", url+"/", "graphql", url+"/graphql")
	if g.DevSMTP != "" {
		log.Info("dev mail: the gateway's email goes to its SMTP catcher; read it in the browser",
			"mail", url+DevMailPath, "smtp", g.DevSMTP)
	}
	if g.DemoToken != "" {
		fmt.Fprintf(os.Stderr, "\nGraphiQL: %s/\nDemo token (pre-filled in GraphiQL):\n  Authorization: Bearer %s\n\n", url, g.DemoToken)
	}
	if g.DevSMTP != "" {
		fmt.Fprintf(os.Stderr, "Dev mail: the email the gateway sends is caught (SMTP %s); read it at %s%s\n\n", g.DevSMTP, url, DevMailPath)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: closing subscriptions (1001), draining requests")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// http.Server.Shutdown drains requests but does not know hijacked connections
	// (WebSockets) and would wait for SSE streams: the handler ends those itself.
	streams := make(chan error, 1)
	go func() { streams <- h.Shutdown(shutCtx) }()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("shutdown", "err", err)
		_ = srv.Close()
	}
	if err := <-streams; err != nil {
		log.Warn("shutdown: subscriptions still open", "websockets", h.WebSockets(), "err", err)
	}
	return nil
}

// newBroker returns the configured broker: in-process, or Redis pub/sub; lag (may be
// nil) receives the publish lag of every delivered change.
func newBroker(ctx context.Context, cfg Config, log *slog.Logger, lag live.LagObserver) (live.Broker, error) {
	if cfg.Broker == "redis" {
		b, err := live.NewRedis(ctx, live.RedisOptions{URL: cfg.RedisURL, Logger: log, Lag: lag})
		if err != nil {
			return nil, fmt.Errorf("INBOX_BROKER=redis: %w", err)
		}
		log.Info("broker: redis", "url", redactURL(cfg.RedisURL))
		return b, nil
	}
	return live.NewLocal(live.WithLagObserver(lag)), nil
}

// WithMetricsRoute serves GET /metrics beside h when INBOX_METRICS_ADDR is empty: open,
// as Prometheus scrapes are (it shows counts by operation type, root field, code and
// transport; never a user, tenant or client-chosen name).
func WithMetricsRoute(cfg Config, h http.Handler, reg *metrics.Registry) http.Handler {
	if cfg.MetricsAddr != "" {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.Routed(reg.Handler()))
	mux.Handle("/", h)
	return mux
}

// ServeMetrics serves GET /metrics on a listener of its own when INBOX_METRICS_ADDR is
// an address, and returns its URL ("" when none) and what stops it.
func ServeMetrics(cfg Config, log *slog.Logger, reg *metrics.Registry) (url string, stop func(), err error) {
	if cfg.MetricsAddr == "" || cfg.MetricsAddr == "off" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return "", nil, fmt.Errorf("INBOX_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	url = "http://" + displayAddr(ln.Addr()) + "/metrics"
	log.Info("metrics listening", "url", url)
	return url, func() { _ = srv.Close() }, nil
}

// redactURL drops a URL's password for logging.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}

func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
