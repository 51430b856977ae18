package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/text/language"

	"github.com/inboxgw/gateway/inbox"
)

// Attribute names of the preferences item (prefsItem).
const (
	prefsAttrMutedTargets    = "mutedTargets"
	prefsAttrQuietHours      = "quietHours"
	prefsAttrTimezone        = "timezone"
	prefsAttrLocale          = "locale"
	prefsAttrCategoryPrefix  = "cat#"
	prefsAttrEntityType      = "entityType"
	prefsAttrMutedCategories = "mutedCategories"
)

// prefsAttrSwitch is the attribute of the global switch of channel (one of
// inbox.SwitchChannels): its inbox.ChannelSpec.Switch ("inApp", "email", ...).
func prefsAttrSwitch(channel string) string {
	s, _ := inbox.Spec(channel)
	return s.Switch
}

// prefsAttrCategorySwitch is the attribute of category's switch named channel (an
// inbox.ChannelSpec.Switch): "cat#<category>#<channel>". Categories never contain '#'
// (inbox.CheckID).
func prefsAttrCategorySwitch(category, channel string) string {
	return prefsAttrCategoryPrefix + category + "#" + channel
}

// WithTenantPreferences sets the tenants' preference defaults: what a user has until
// they set their own, and the critical categories (default: every channel on, nothing
// critical, inbox.DefaultTenantPreferences) for tenants whose settings (PutTenantSettings)
// set none. f is called for every preferences read, update and send, with the tenant
// id; it must be fast and safe for concurrent use.
func WithTenantPreferences(f func(tenantID string) inbox.TenantPreferences) Option {
	return func(s *Store) { s.tenantPrefs = f }
}

// tenantDefaults returns the preference defaults of tenantID: its settings' (AP23,
// through the cache) or the configured ones.
func (s *Store) tenantDefaults(ctx context.Context, tenantID string) (inbox.TenantPreferences, error) {
	set, err := s.tenantSettings(ctx, tenantID)
	if err != nil {
		return inbox.TenantPreferences{}, err
	}
	return s.config(tenantID, set).Prefs, nil
}

// Preferences returns v's effective preferences: the tenant's defaults overlaid by what
// v set (see inbox.TenantPreferences.Resolve). One strongly consistent GetItem of PREFS
// (AP13), so a read after updatePreferences sees the update; when this instance has not
// cached the tenant's settings (AP23), one BatchGetItem of PREFS and the settings instead.
func (s *Store) Preferences(ctx context.Context, v inbox.Viewer) (inbox.Preferences, error) {
	if err := checkViewer(v); err != nil {
		return inbox.Preferences{}, err
	}
	prefsKey := itemKey{userPK(v), skPrefs}
	set, cached := s.settings.get(v.TenantID)
	var item map[string]types.AttributeValue
	if cached {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            prefsKey.av(),
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return inbox.Preferences{}, fmt.Errorf("get preferences: %w", err)
		}
		item = out.Item
	} else {
		setKey := itemKey{settingsPK(v.TenantID), skSettings}
		got, err := s.batchGet(ctx, []itemKey{prefsKey, setKey}, batchGetOptions{consistent: true})
		if err != nil {
			return inbox.Preferences{}, err
		}
		if set, err = decodeSettings(got[setKey]); err != nil {
			return inbox.Preferences{}, err
		}
		s.settings.put(v.TenantID, set)
		item = got[prefsKey]
	}
	own, err := decodePrefs(item)
	if err != nil {
		return inbox.Preferences{}, err
	}
	return s.config(v.TenantID, set).Prefs.Resolve(own), nil
}

// UpdatePreferences changes what v set (fields of upd left unset keep their value) and
// returns v's effective preferences after it. Everything is checked before anything is
// written (inbox.PreferencesUpdate.Validate and the tenant's CheckUpdate; the locale is
// also looked up in the BCP 47 registry and stored canonical, "de-de" as "de-DE"), then
// it is one UpdateItem of PREFS (AP14; preceded by a GetItem of the tenant's settings,
// AP23, when this instance has not cached them): SET switches, quiet hours, zone and locale, ADD
// muteTargets to the mutedTargets string set or DELETE unmuteTargets from it. An update
// that both mutes and unmutes takes a second UpdateItem for the DELETE (one expression
// cannot ADD to and DELETE from one attribute); the first one carries every condition,
// so when it is refused nothing is written.
//
// Conditions, each a BAD_USER_INPUT when not met: at most inbox.MaxMutedTargets targets
// muted afterwards (checked as "the set has at most 100 minus the targets to mute"; when
// that refuses an update some of whose targets were muted already, a second UpdateItem
// counts only the new ones, on condition that the others are still muted); quiet hours need a
// timezone (the update's, the stored one or the tenant's) and a timezone cannot be
// cleared while quiet hours are set without one from the tenant. Category switches are
// bounded by the item size (400 KB: some hundreds of categories with every switch set): an update that would
// exceed it is BAD_USER_INPUT too.
func (s *Store) UpdatePreferences(ctx context.Context, v inbox.Viewer, upd inbox.PreferencesUpdate) (inbox.Preferences, error) {
	if err := checkViewer(v); err != nil {
		return inbox.Preferences{}, err
	}
	if err := upd.Validate(); err != nil {
		return inbox.Preferences{}, err
	}
	d, err := s.tenantDefaults(ctx, v.TenantID)
	if err != nil {
		return inbox.Preferences{}, err
	}
	if err := d.CheckUpdate(upd); err != nil {
		return inbox.Preferences{}, err
	}
	if upd.Locale != nil && *upd.Locale != "" {
		tag, err := language.Parse(*upd.Locale)
		if err != nil {
			return inbox.Preferences{}, inbox.Errorf(inbox.CodeBadUserInput, "locale %q is not a known BCP 47 language tag", *upd.Locale)
		}
		canonical := tag.String()
		upd.Locale = &canonical
	}
	zoneCleared := upd.Timezone != nil && *upd.Timezone == ""
	if d.Timezone == "" && upd.QuietHours != nil && zoneCleared {
		return inbox.Preferences{}, inbox.Errorf(inbox.CodeBadUserInput, "quietHours need a timezone")
	}
	if upd.IsZero() {
		return s.Preferences(ctx, v)
	}

	mute, unmute := targetSet(upd.MuteTargets), targetSet(upd.UnmuteTargets)
	// The UpdateItem is built by build: already are members of mute known to be muted,
	// which the bound does not count (their contains() is part of the condition).
	zoneRule := "" // what a failed zone condition means
	key := itemKey{userPK(v), skPrefs}
	build := func(already []string) (*dynamodb.UpdateItemInput, error) {
		x, rule, err := prefsUpdate(upd, d.Timezone, mute, unmute, already)
		if err != nil {
			return nil, err
		}
		zoneRule = rule
		return &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.table),
			Key:                                 key.av(),
			UpdateExpression:                    x.Update(),
			ConditionExpression:                 x.Condition(),
			ExpressionAttributeNames:            x.Names(),
			ExpressionAttributeValues:           x.Values(),
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, nil
	}
	in, err := build(nil)
	if err != nil {
		return inbox.Preferences{}, err
	}
	out, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if len(mute) > 0 && errors.As(err, &ccf) {
		// Refused by the bound, perhaps only because some targets to mute were muted
		// already: once more, counting only the new ones (and requiring the others
		// still muted), when the item as it was leaves room for them.
		if already := mutedAlready(ccf.Item, mute); len(already) > 0 {
			if in, err = build(already); err != nil {
				return inbox.Preferences{}, err
			}
			out, err = s.db.UpdateItem(ctx, in)
		}
	}
	if err != nil {
		return inbox.Preferences{}, prefsUpdateError(err, len(mute), zoneRule)
	}
	if len(mute) == 0 {
		unmute = nil // done by the one UpdateItem
	}
	item := out.Attributes
	if len(unmute) > 0 {
		x, err := buildUpdate(expression.Delete(expression.Name(prefsAttrMutedTargets),
			expression.Value(&types.AttributeValueMemberSS{Value: unmute})), nil, nil)
		if err != nil {
			return inbox.Preferences{}, fmt.Errorf("unmute targets: %w", err)
		}
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       key.av(),
			UpdateExpression:          x.Update(),
			ExpressionAttributeNames:  x.Names(),
			ExpressionAttributeValues: x.Values(),
			ReturnValues:              types.ReturnValueAllNew,
		})
		if err != nil {
			return inbox.Preferences{}, fmt.Errorf("unmute targets: %w", err)
		}
		item = out.Attributes
	}
	own, err := decodePrefs(item)
	if err != nil {
		return inbox.Preferences{}, err
	}
	return d.Resolve(own), nil
}

// prefsUpdateError translates a refused preferences UpdateItem: a failed condition into
// the rule it enforces (the muted-targets bound when the item as it was, which the
// refusal returns, leaves no room for muting more; zoneRule otherwise), an item grown
// over DynamoDB's size limit into BAD_USER_INPUT.
func prefsUpdateError(err error, muting int, zoneRule string) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		old, derr := decodePrefs(ccf.Item)
		if muting > 0 && (zoneRule == "" || derr == nil && len(old.MutedTargets)+muting > inbox.MaxMutedTargets) {
			return inbox.Errorf(inbox.CodeBadUserInput,
				"at most %d muted targets: %d are muted and %d more asked (unmute some first)", inbox.MaxMutedTargets, len(old.MutedTargets), muting)
		}
		return inbox.Errorf(inbox.CodeBadUserInput, "%s", zoneRule)
	}
	var ve interface{ ErrorMessage() string }
	if errors.As(err, &ve) && strings.Contains(ve.ErrorMessage(), "exceeded the maximum allowed size") {
		return inbox.Errorf(inbox.CodeBadUserInput, "too many preferences: the preferences item would exceed its size limit")
	}
	return fmt.Errorf("update preferences: %w", err)
}

// mutedAlready returns the members of mute that item's mutedTargets holds.
func mutedAlready(item map[string]types.AttributeValue, mute []string) []string {
	var p prefsItem
	if item == nil || attributevalue.UnmarshalMap(item, &p) != nil {
		return nil
	}
	var out []string
	for _, m := range mute {
		if slices.Contains(p.MutedTargets, m) {
			out = append(out, m)
		}
	}
	return out
}

// targetSet returns the mutedTargets members of refs ("<kind>#<id>"), deduplicated.
func targetSet(refs []inbox.ProfileRef) []string {
	var out []string
	for _, r := range refs {
		m := r.TargetKind + "#" + r.ID
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// decodePrefs reads a PREFS item (nil: none) into what the user set. Members of
// mutedTargets that are not "<kind>#<id>" (written by someone else) are ignored.
func decodePrefs(item map[string]types.AttributeValue) (inbox.OwnPreferences, error) {
	var own inbox.OwnPreferences
	if item == nil {
		return own, nil
	}
	var p prefsItem
	if err := attributevalue.UnmarshalMap(item, &p); err != nil {
		return own, fmt.Errorf("decode preferences: %w", err)
	}
	for _, c := range inbox.SwitchChannels {
		if b, ok := item[prefsAttrSwitch(c)].(*types.AttributeValueMemberBOOL); ok {
			if own.Channels == nil {
				own.Channels = inbox.SwitchChanges{}
			}
			own.Channels[c] = b.Value
		}
	}
	own.MutedCategories = p.Muted
	for _, m := range p.MutedTargets {
		if kind, id, ok := strings.Cut(m, "#"); ok && kind != "" && id != "" {
			own.MutedTargets = append(own.MutedTargets, inbox.ProfileRef{TargetKind: kind, ID: id})
		}
	}
	slices.SortFunc(own.MutedTargets, func(a, b inbox.ProfileRef) int {
		if c := strings.Compare(a.TargetKind, b.TargetKind); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if p.QuietHours != nil {
		own.QuietHours = &inbox.QuietHours{Start: p.QuietHours.Start, End: p.QuietHours.End}
	}
	own.Timezone, own.Locale = p.Timezone, p.Locale
	for name, av := range item {
		rest, ok := strings.CutPrefix(name, prefsAttrCategoryPrefix)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '#')
		b, isBool := av.(*types.AttributeValueMemberBOOL)
		if i <= 0 || !isBool {
			continue
		}
		category, channel := rest[:i], rest[i+1:]
		if own.Categories == nil {
			own.Categories = map[string]inbox.SwitchChanges{}
		}
		c := inbox.ChannelBySwitch(channel)
		if c == "" {
			continue
		}
		sw := own.Categories[category]
		if sw == nil {
			sw = inbox.SwitchChanges{}
			own.Categories[category] = sw
		}
		sw[c] = b.Value
	}
	return own, nil
}

// prefsUpdate is the expression of the preferences UpdateItem of upd (see
// UpdatePreferences): SET entityType, the switches set (a category's named
// prefsAttrCategorySwitch, kept whole whatever it holds: exprNames), quiet hours,
// timezone and locale; REMOVE what upd clears; ADD mute to mutedTargets on condition that
// it stays within inbox.MaxMutedTargets (already: members of mute known to be muted,
// which the bound does not count, on condition that they still are) or else DELETE
// unmute from it; and, when the tenant has no timezone (tenantZone ""), the zone
// conditions, with zoneRule saying what a failed one means.
func prefsUpdate(upd inbox.PreferencesUpdate, tenantZone string, mute, unmute, already []string) (x expression.Expression, zoneRule string, err error) {
	var names exprNames
	up := expression.Set(expression.Name(prefsAttrEntityType), expression.Value(entityPrefs))
	for _, c := range inbox.SwitchChannels {
		if on, ok := upd.Channels[c]; ok {
			up = up.Set(expression.Name(prefsAttrSwitch(c)), expression.Value(on))
		}
	}
	for _, cat := range upd.Categories {
		for _, c := range inbox.SwitchChannels {
			if on, ok := cat.Channels[c]; ok {
				up = up.Set(names.name(prefsAttrCategorySwitch(cat.Category, prefsAttrSwitch(c))), expression.Value(on))
			}
		}
	}
	quiet := expression.Name(prefsAttrQuietHours)
	if upd.QuietHours != nil {
		up = up.Set(quiet, expression.Value(quietHoursAttr{Start: upd.QuietHours.Start, End: upd.QuietHours.End}))
	}
	if upd.ClearQuietHours {
		up = up.Remove(quiet)
	}
	for _, f := range []struct {
		attr string
		val  *string
	}{{prefsAttrTimezone, upd.Timezone}, {prefsAttrLocale, upd.Locale}} {
		switch {
		case f.val == nil:
		case *f.val == "":
			up = up.Remove(expression.Name(f.attr))
		default:
			up = up.Set(expression.Name(f.attr), expression.Value(*f.val))
		}
	}
	var conds []expression.ConditionBuilder
	muted := expression.Name(prefsAttrMutedTargets)
	if len(mute) > 0 {
		up = up.Add(muted, expression.Value(&types.AttributeValueMemberSS{Value: mute}))
		room := expression.Value(inbox.MaxMutedTargets - (len(mute) - len(already)))
		if len(already) == 0 {
			conds = append(conds, muted.AttributeNotExists().Or(muted.Size().LessThanEqual(room)))
		} else {
			conds = append(conds, muted.Size().LessThanEqual(room))
			for _, m := range already {
				conds = append(conds, muted.Contains(m))
			}
		}
	} else if len(unmute) > 0 {
		up = up.Delete(muted, expression.Value(&types.AttributeValueMemberSS{Value: unmute}))
	}
	if tenantZone == "" {
		zoneCleared := upd.Timezone != nil && *upd.Timezone == ""
		switch {
		case upd.QuietHours != nil && upd.Timezone == nil:
			conds = append(conds, expression.Name(prefsAttrTimezone).AttributeExists())
			zoneRule = "quietHours need a timezone"
		case zoneCleared && !upd.ClearQuietHours:
			conds = append(conds, quiet.AttributeNotExists())
			zoneRule = "the timezone cannot be cleared while quiet hours are set"
		}
	}
	if x, err = buildUpdate(up, conds, &names); err != nil {
		return x, "", fmt.Errorf("encode preferences: %w", err)
	}
	return x, zoneRule, nil
}
