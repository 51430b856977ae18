package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/text/language"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Tenant settings (AP23): one item per tenant, T#{t}#SETTINGS / SETTINGS, holding what
// PUT /v1/tenant/settings sets. A tenant without one has the store's configured
// defaults (WithTenantPreferences, WithRetention) and no webhook. Every read goes through
// a small per-instance cache (WithSettingsCacheTTL): a change made on another instance
// shows within the TTL; one made here shows at once.

// DefaultSettingsCacheTTL is how long a tenant's settings are served from the cache
// unless WithSettingsCacheTTL says otherwise.
const DefaultSettingsCacheTTL = 30 * time.Second

// maxSettingsCache bounds the tenants whose settings one instance caches.
const maxSettingsCache = 10000

// WithSettingsCacheTTL sets how long a tenant's settings (and their absence) are served
// from this instance's cache (default DefaultSettingsCacheTTL; 0 reads them on every use).
func WithSettingsCacheTTL(d time.Duration) Option {
	return func(s *Store) { s.settings = newSettingsCache(d) }
}

// settingsItem is a tenant's settings as stored.
type settingsItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	// Preferences is inbox.TenantPreferences as JSON ("" for none).
	Preferences   string `dynamodbav:"preferences,omitempty"`
	WebhookURL    string `dynamodbav:"webhookUrl,omitempty"`
	WebhookSecret string `dynamodbav:"webhookSecret,omitempty"`
	// RetentionMs is the retention in milliseconds (absent: the configured one).
	RetentionMs *int64 `dynamodbav:"retentionMs,omitempty"`
	UpdatedAt   int64  `dynamodbav:"updatedAt"`
}

// ConfiguredPreferences returns the preference defaults this store is configured with
// for tenantID (WithTenantPreferences; inbox.DefaultTenantPreferences without it): what a
// tenant without stored settings has, and what a settings PUT leaves out falls back to.
func (s *Store) ConfiguredPreferences(tenantID string) inbox.TenantPreferences {
	return s.config(tenantID, nil).Prefs
}

// config returns the effective configuration of tenantID whose stored settings are set
// (nil: none stored), as the routing decisions read it: the stored settings over the
// store's configured defaults.
func (s *Store) config(tenantID string, set *inbox.TenantSettings) routing.Tenant {
	c := routing.Tenant{Retention: s.retention}
	if s.tenantPrefs == nil {
		c.Prefs = inbox.DefaultTenantPreferences()
	} else {
		c.Prefs = s.tenantPrefs(tenantID)
	}
	if set == nil {
		return c
	}
	if set.Preferences != nil {
		c.Prefs = *set.Preferences
	}
	if set.Retention != nil {
		c.Retention = *set.Retention
	}
	c.WebhookURL = set.WebhookURL
	return c
}

// TenantSettings returns tenantID's stored settings (the zero value when it has none:
// the configured defaults apply). One strongly consistent GetItem (AP23), which also
// refreshes this instance's cache.
func (s *Store) TenantSettings(ctx context.Context, tenantID string) (inbox.TenantSettings, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.TenantSettings{}, err
	}
	set, err := s.readSettings(ctx, tenantID)
	if err != nil || set == nil {
		return inbox.TenantSettings{}, err
	}
	return *set, nil
}

// PutTenantSettings replaces tenantID's settings with set (checked by
// inbox.TenantSettings.Validate; the locale of the preferences stored canonical) and
// returns them as stored. One PutItem (AP23); this instance's cache takes them at once.
// Errors: BAD_USER_INPUT for invalid settings.
func (s *Store) PutTenantSettings(ctx context.Context, tenantID string, set inbox.TenantSettings) (inbox.TenantSettings, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.TenantSettings{}, err
	}
	if err := set.Validate(); err != nil {
		return inbox.TenantSettings{}, err
	}
	it := settingsItem{PK: settingsPK(tenantID), SK: skSettings, EntityType: entityTenantSettings,
		WebhookURL: set.WebhookURL, WebhookSecret: set.WebhookSecret, UpdatedAt: s.now().UnixMilli()}
	if p := set.Preferences; p != nil {
		cp := *p
		if cp.Locale != "" {
			tag, err := language.Parse(cp.Locale)
			if err != nil {
				return inbox.TenantSettings{}, inbox.Errorf(inbox.CodeBadUserInput, "locale %q is not a known BCP 47 language tag", cp.Locale)
			}
			cp.Locale = tag.String()
		}
		set.Preferences = &cp
		b, err := json.Marshal(cp)
		if err != nil {
			return inbox.TenantSettings{}, fmt.Errorf("encode tenant preferences: %w", err)
		}
		it.Preferences = string(b)
	}
	if set.Retention != nil {
		ms := set.Retention.Milliseconds()
		it.RetentionMs = &ms
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return inbox.TenantSettings{}, fmt.Errorf("encode tenant settings: %w", err)
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return inbox.TenantSettings{}, fmt.Errorf("put tenant settings: %w", err)
	}
	s.settings.put(tenantID, &set)
	return set, nil
}

// CachedTenantSettings returns tenantID's settings as TenantSettings does, but from this
// instance's cache while it is fresh (the settings cache TTL; a PUT through this instance
// refreshes it at once): the delivery worker reads the webhook URL and secret here for
// every WEBHOOK delivery without a GetItem each.
func (s *Store) CachedTenantSettings(ctx context.Context, tenantID string) (inbox.TenantSettings, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.TenantSettings{}, err
	}
	set, err := s.tenantSettings(ctx, tenantID)
	if err != nil || set == nil {
		return inbox.TenantSettings{}, err
	}
	return *set, nil
}

// tenantSettings returns tenantID's settings (nil: none stored) from the cache, reading
// them (GetItem) when the cache has none fresh.
func (s *Store) tenantSettings(ctx context.Context, tenantID string) (*inbox.TenantSettings, error) {
	if set, ok := s.settings.get(tenantID); ok {
		return set, nil
	}
	return s.readSettings(ctx, tenantID)
}

// readSettings reads tenantID's settings item (strongly consistent GetItem) into the cache.
func (s *Store) readSettings(ctx context.Context, tenantID string) (*inbox.TenantSettings, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            itemKey{settingsPK(tenantID), skSettings}.av(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get tenant settings: %w", err)
	}
	set, err := decodeSettings(out.Item)
	if err != nil {
		return nil, err
	}
	s.settings.put(tenantID, set)
	return set, nil
}

// decodeSettings reads a settings item (nil: none, and nil is returned).
func decodeSettings(item map[string]types.AttributeValue) (*inbox.TenantSettings, error) {
	if item == nil {
		return nil, nil
	}
	var it settingsItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("decode tenant settings: %w", err)
	}
	set := &inbox.TenantSettings{WebhookURL: it.WebhookURL, WebhookSecret: it.WebhookSecret}
	if it.Preferences != "" {
		var p inbox.TenantPreferences
		if err := json.Unmarshal([]byte(it.Preferences), &p); err != nil {
			return nil, fmt.Errorf("decode tenant preferences: %w", err)
		}
		set.Preferences = &p
	}
	if it.RetentionMs != nil {
		d := time.Duration(*it.RetentionMs) * time.Millisecond
		set.Retention = &d
	}
	return set, nil
}

// settingsCache holds tenants' settings (nil for a tenant known to have none) for ttl.
// At most maxSettingsCache tenants: a full cache is emptied of its expired entries, then
// of everything if that freed nothing.
type settingsCache struct {
	ttl time.Duration
	// now is the store's clock (New sets it): an entry's age is on the clock its writes
	// are, so a run on a fake clock (the data model's) caches the same on a slow machine.
	now func() time.Time
	mu  sync.Mutex
	m   map[string]settingsEntry
}

type settingsEntry struct {
	set *inbox.TenantSettings
	at  time.Time
}

func newSettingsCache(ttl time.Duration) *settingsCache {
	return &settingsCache{ttl: ttl, now: time.Now, m: map[string]settingsEntry{}}
}

// get returns tenantID's cached settings and whether a fresh entry was there.
func (c *settingsCache) get(tenantID string) (*inbox.TenantSettings, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[tenantID]
	if !ok || c.now().Sub(e.at) >= c.ttl {
		return nil, false
	}
	return e.set, true
}

// put caches set (nil: none stored) as tenantID's settings.
func (c *settingsCache) put(tenantID string, set *inbox.TenantSettings) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxSettingsCache {
		for k, e := range c.m {
			if c.now().Sub(e.at) >= c.ttl {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxSettingsCache {
			clear(c.m)
		}
	}
	c.m[tenantID] = settingsEntry{set: set, at: c.now()}
}

// Critical reports whether category is critical for tenantID (its settings over the
// configured defaults, through the per-instance settings cache): a critical email
// carries no unsubscribe link. "" is never critical.
func (s *Store) Critical(ctx context.Context, tenantID, category string) (bool, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return false, err
	}
	set, err := s.tenantSettings(ctx, tenantID)
	if err != nil {
		return false, err
	}
	return s.config(tenantID, set).Critical(category), nil
}
