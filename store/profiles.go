package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/inboxgw/gateway/inbox"
)

// profileProjection reads only what the schema can render of a profile, plus its key
// (which matches answers to keys). The ids and kind are not read: Profiles takes them
// from the ref that asked, which the key was built from.
var profileNames = map[string]string{"#pk": attrPK, "#sk": attrSK, "#name": "name", "#avatar": "avatarUrl", "#url": "url", "#title": "title"}

const profileProjection = "#pk, #sk, #name, #avatar, #url, #title"

// Profiles loads the actor and target profiles refs of a tenant (AP9), aligned with refs:
// nil where none exists. Refs are deduplicated, then read with BatchGetItem (≤100 keys a
// call, calls sent concurrently, UnprocessedKeys retried with backoff) projecting only the
// attributes the schema renders. A ref whose id could not be a key resolves to nil.
func (s *Store) Profiles(ctx context.Context, tenantID string, refs []inbox.ProfileRef) ([]*inbox.Profile, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return nil, err
	}
	out := make([]*inbox.Profile, len(refs))
	// pks[i] is refs[i]'s partition key ("" for a ref that could not be a key); first
	// maps each distinct key to the index of its first ref, which alone is looked up and
	// decoded: later refs of the same key share its profile.
	pks := make([]string, len(refs))
	first := make(map[string]int, len(refs))
	keys := make([]itemKey, 0, len(refs))
	for i, r := range refs {
		if !validRef(r) {
			continue
		}
		pk := profilePK(tenantID, r)
		pks[i] = pk
		if _, dup := first[pk]; dup {
			continue
		}
		first[pk] = i
		if p, ok := s.profiles.get(pk); ok {
			out[i] = p
			continue
		}
		keys = append(keys, itemKey{pk, skProfile})
	}
	got, err := s.batchGet(ctx, keys, batchGetOptions{projection: profileProjection, names: profileNames})
	if err != nil {
		return nil, err
	}
	var it profileItem // decoded into for each profile (it escapes: one allocation per call)
	for i, r := range refs {
		pk := pks[i]
		if pk == "" {
			continue
		}
		if j := first[pk]; j != i {
			out[i] = out[j]
			continue
		}
		if out[i] != nil { // from the shared cache
			continue
		}
		raw, ok := got[itemKey{pk, skProfile}]
		if !ok {
			continue
		}
		it = profileItem{}
		if err := decodeProfile(raw, &it); err != nil {
			return nil, fmt.Errorf("decode profile: %w", err)
		}
		p := newProfile(r, &it)
		s.profiles.add(pk, p)
		out[i] = p
	}
	return out, nil
}

// newProfile is the profile of ref decoded into it. The ids and kind come from ref, which
// the item's key was built from.
func newProfile(r inbox.ProfileRef, it *profileItem) *inbox.Profile {
	if r.TargetKind == "" {
		// The Profile and its Actor (or Target) in one allocation: they live as long.
		a := &struct {
			p inbox.Profile
			a inbox.Actor
		}{a: inbox.Actor{ActorID: r.ID, Name: it.Name, AvatarURL: it.AvatarURL, URL: it.URL}}
		a.p.Actor = &a.a
		return &a.p
	}
	t := &struct {
		p inbox.Profile
		t inbox.Target
	}{t: inbox.Target{TargetID: r.ID, Kind: r.TargetKind, Title: it.Title, URL: it.URL}}
	t.p.Target = &t.t
	return &t.p
}

func validRef(r inbox.ProfileRef) bool {
	if inbox.CheckID("id", r.ID) != nil {
		return false
	}
	return r.TargetKind == "" || inbox.CheckID("kind", r.TargetKind) == nil
}

// UpsertActor writes the fields of a that are set into its profile item (UpdateItem, so a
// send that names only the id keeps the stored name and avatar).
func (s *Store) UpsertActor(ctx context.Context, tenantID string, a *inbox.Actor) error {
	return s.upsertProfile(ctx, actorPK(tenantID, a.ActorID), entityActor, map[string]string{
		"actorId": a.ActorID, "name": a.Name, "avatarUrl": a.AvatarURL, "url": a.URL,
	})
}

// UpsertTarget is UpsertActor for a target.
func (s *Store) UpsertTarget(ctx context.Context, tenantID string, t *inbox.Target) error {
	return s.upsertProfile(ctx, targetPK(tenantID, t.Kind, t.TargetID), entityTarget, map[string]string{
		"targetId": t.TargetID, "kind": t.Kind, "title": t.Title, "url": t.URL,
	})
}

func (s *Store) upsertProfile(ctx context.Context, pk, entity string, fields map[string]string) error {
	defer s.profiles.remove(pk)
	up := expression.Set(expression.Name("entityType"), expression.Value(entity))
	for _, name := range []string{"actorId", "targetId", "kind", "name", "avatarUrl", "url", "title"} {
		if val := fields[name]; val != "" {
			up = up.Set(expression.Name(name), expression.Value(val))
		}
	}
	x, err := buildUpdate(up, nil, nil)
	if err != nil {
		return fmt.Errorf("upsert profile: %w", err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{pk, skProfile}.av(),
		UpdateExpression:          x.Update(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	})
	if err != nil {
		return fmt.Errorf("upsert profile: %w", err)
	}
	return nil
}

// MutedCategories returns the categories v has opted out of (GetItem PREFS).
func (s *Store) MutedCategories(ctx context.Context, v inbox.Viewer) ([]string, error) {
	if err := checkViewer(v); err != nil {
		return nil, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table),
		Key:       itemKey{userPK(v), skPrefs}.av(),
	})
	if err != nil {
		return nil, fmt.Errorf("get preferences: %w", err)
	}
	var p prefsItem
	if out.Item != nil {
		if err := attributevalue.UnmarshalMap(out.Item, &p); err != nil {
			return nil, fmt.Errorf("decode preferences: %w", err)
		}
	}
	return p.Muted, nil
}

// SetMutedCategories replaces the categories v has opted out of (the v1 API; UpdateItem
// of PREFS, keeping the rest of v's preferences): sends in those categories skip v unless
// v turned the category's in-app switch on with updatePreferences. Errors: BAD_USER_INPUT for more than 100 categories or one that
// is empty or over 256 bytes.
func (s *Store) SetMutedCategories(ctx context.Context, v inbox.Viewer, categories []string) error {
	if err := checkViewer(v); err != nil {
		return err
	}
	if len(categories) > 100 {
		return inbox.Errorf(inbox.CodeBadUserInput, "at most 100 muted categories")
	}
	set := make([]string, 0, len(categories))
	seen := map[string]bool{}
	for _, c := range categories {
		if c == "" || len(c) > inbox.MaxIDBytes {
			return inbox.Errorf(inbox.CodeBadUserInput, "categories must be 1..%d bytes", inbox.MaxIDBytes)
		}
		if !seen[c] {
			seen[c] = true
			set = append(set, c)
		}
	}
	// An UpdateItem, not a PutItem: the item also holds what updatePreferences set.
	up, muted := expression.Set(expression.Name(attrEntityType), expression.Value(entityPrefs)), expression.Name(prefsAttrMutedCategories)
	if len(set) > 0 {
		up = up.Set(muted, expression.Value(&types.AttributeValueMemberSS{Value: set}))
	} else {
		up = up.Remove(muted)
	}
	x, err := buildUpdate(up, nil, nil)
	if err != nil {
		return fmt.Errorf("update preferences: %w", err)
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       itemKey{userPK(v), skPrefs}.av(),
		UpdateExpression:          x.Update(),
		ExpressionAttributeNames:  x.Names(),
		ExpressionAttributeValues: x.Values(),
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("update preferences: %w", err)
	}
	return nil
}

// profileCache is the optional shared cache of profiles across requests: bounded, with
// expiry (hashicorp/golang-lru/v2 expirable). A profile upserted by a send on this
// instance is removed at once; other instances see the change when their entry expires.
// Only found profiles are cached, so a new actor appears without delay.
type profileCache struct {
	lru          *expirable.LRU[string, *inbox.Profile]
	hits, misses atomic.Uint64
}

func (c *profileCache) get(pk string) (*inbox.Profile, bool) {
	if c == nil || c.lru == nil {
		return nil, false
	}
	p, ok := c.lru.Get(pk)
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return p, ok
}

func (c *profileCache) add(pk string, p *inbox.Profile) {
	if c != nil && c.lru != nil {
		c.lru.Add(pk, p)
	}
}

func (c *profileCache) remove(pk string) {
	if c != nil && c.lru != nil {
		c.lru.Remove(pk)
	}
}

// WithProfileCache shares up to size actor and target profiles across requests for ttl
// (both must be positive, else no cache: the default). Reads then skip BatchGetItem for
// cached profiles; a profile changed by another instance may be served stale for up to ttl.
func WithProfileCache(size int, ttl time.Duration) Option {
	return func(s *Store) {
		if size > 0 && ttl > 0 {
			s.profiles = &profileCache{lru: expirable.NewLRU[string, *inbox.Profile](size, nil, ttl)}
		}
	}
}

// ProfileCacheStats returns the shared profile cache's hits and misses since start (both
// zero without a cache).
func (s *Store) ProfileCacheStats() (hits, misses uint64) {
	if s.profiles == nil {
		return 0, 0
	}
	return s.profiles.hits.Load(), s.profiles.misses.Load()
}

// profileBatch collects the profiles a page reads in its one BatchGetItem, along with
// the page's other items: profiles in the shared cache are answered at once, the others
// become keys of the batch.
type profileBatch struct {
	s        *Store
	tenantID string
	// got holds every ref asked (nil until found); refs maps the batch's keys to them.
	got  map[inbox.ProfileRef]*inbox.Profile
	refs map[itemKey]inbox.ProfileRef
}

func (s *Store) newProfileBatch(tenantID string) *profileBatch {
	return &profileBatch{s: s, tenantID: tenantID, got: map[inbox.ProfileRef]*inbox.Profile{}, refs: map[itemKey]inbox.ProfileRef{}}
}

// want adds r to the batch, appending its key to keys unless r is cached, asked
// already, or could not be a key.
func (b *profileBatch) want(r inbox.ProfileRef, keys []itemKey) []itemKey {
	if !validRef(r) {
		return keys
	}
	if _, ok := b.got[r]; ok {
		return keys
	}
	pk := profilePK(b.tenantID, r)
	if p, ok := b.s.profiles.get(pk); ok {
		b.got[r] = p
		return keys
	}
	b.got[r] = nil
	k := itemKey{pk, skProfile}
	b.refs[k] = r
	return append(keys, k)
}

// decode fills the batch's profiles from the BatchGetItem's answers (adding them to the
// shared cache) and returns them by ref.
func (b *profileBatch) decode(items map[itemKey]map[string]types.AttributeValue) (map[inbox.ProfileRef]*inbox.Profile, error) {
	for k, r := range b.refs {
		raw, ok := items[k]
		if !ok {
			continue
		}
		var it profileItem
		if err := decodeProfile(raw, &it); err != nil {
			return nil, fmt.Errorf("decode profile: %w", err)
		}
		p := newProfile(r, &it)
		b.s.profiles.add(k.pk, p)
		b.got[r] = p
	}
	return b.got, nil
}
