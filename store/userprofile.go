package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/text/language"

	"github.com/inboxgw/gateway/inbox"
)

// PutUserProfile replaces v's channel profile (PUT /v1/users/{id}: the addresses of the
// registered channels, each an attribute named by its inbox.ChannelSpec.AddressKey,
// locale, timezone; "" leaves a field unset) and returns it as stored. It is checked first
// (inbox.UserProfile.Validate; the locale is also looked up in the BCP 47 registry and
// stored canonical, "de-de" as "de-DE"), then one UpdateItem of the user's PROFILE item
// (AP24). Sends read it with the recipients' preferences (ReadRecipients). Errors:
// BAD_USER_INPUT for an invalid profile or viewer. The user's push devices (RegisterDevice)
// are kept.
func (s *Store) PutUserProfile(ctx context.Context, v inbox.Viewer, p inbox.UserProfile) (inbox.UserProfile, error) {
	if err := checkViewer(v); err != nil {
		return inbox.UserProfile{}, err
	}
	if err := p.Validate(); err != nil {
		return inbox.UserProfile{}, err
	}
	if p.Locale != "" {
		tag, err := language.Parse(p.Locale)
		if err != nil {
			return inbox.UserProfile{}, inbox.Errorf(inbox.CodeBadUserInput, "locale %q is not a known BCP 47 language tag", p.Locale)
		}
		p.Locale = tag.String()
	}
	// An UpdateItem, not a Put: the item also holds the user's push devices.
	up := expression.Set(expression.Name("entityType"), expression.Value(entityUserProfile)).
		Set(expression.Name(statusAttrUpdatedAt), expression.Value(s.now().UnixMilli()))
	type attr struct{ name, v string }
	attrs := make([]attr, 0, len(inbox.AddressKeys)+2)
	for _, k := range inbox.AddressKeys {
		attrs = append(attrs, attr{k, p.Address(k)})
	}
	for _, a := range append(attrs, attr{"locale", p.Locale}, attr{"timezone", p.Timezone}) {
		if a.v == "" {
			up = up.Remove(expression.NameNoDotSplit(a.name))
		} else {
			up = up.Set(expression.NameNoDotSplit(a.name), expression.Value(a.v))
		}
	}
	x, err := buildUpdate(up, nil, nil)
	if err != nil {
		return inbox.UserProfile{}, fmt.Errorf("put user profile: %w", err)
	}
	in := &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: itemKey{userPK(v), skUserProfile}.av(),
		UpdateExpression: x.Update(), ExpressionAttributeNames: x.Names(), ExpressionAttributeValues: x.Values()}
	if _, err := s.db.UpdateItem(ctx, in); err != nil {
		return inbox.UserProfile{}, fmt.Errorf("put user profile: %w", err)
	}
	return inbox.UserProfile{Addresses: profileOnly(p.Addresses), Locale: p.Locale, Timezone: p.Timezone}, nil
}

// profileOnly returns the non-empty addresses of addrs (nil when there is none): what
// the profile reads back.
func profileOnly(addrs map[string]string) map[string]string {
	var out map[string]string
	for k, v := range addrs {
		if v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// UserProfile returns v's channel profile (the zero profile when none is stored). One
// strongly consistent GetItem (AP24).
func (s *Store) UserProfile(ctx context.Context, v inbox.Viewer) (inbox.UserProfile, error) {
	if err := checkViewer(v); err != nil {
		return inbox.UserProfile{}, err
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            itemKey{userPK(v), skUserProfile}.av(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return inbox.UserProfile{}, fmt.Errorf("get user profile: %w", err)
	}
	return decodeUserProfile(out.Item)
}
