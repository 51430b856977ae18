package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
)

// Templates (README AP16, AP17). A template is one item collection, T#{t}#TPL#{id}:
//   - HEAD: the latest version (a counter over every locale), the default locale (the
//     first PUT's) and the locales that have a version;
//   - L#{locale}#V#{%08d version}: one immutable version of one locale's parts.
//
// A PUT writes a new version of one locale: HEAD's version+1 (condition: the version read)
// and the version item, in one TransactWriteItems (AP16). The content of locale L at
// version v is the newest L#{L}#V# item at or below v: one Query, descending, Limit 1 (AP17).
// Versions never change once written, so what a version renders never changes either.
const (
	skTemplateHead   = "HEAD"
	entityTemplate   = "Template"
	entityTemplateV  = "TemplateVersion"
	tplAttrVersion   = "version"
	tplVersionDigits = 8
)

// templatePK is the partition key of template id's items (AP16, AP17).
func templatePK(tenantID, id string) string { return "T#" + tenantID + "#TPL#" + id }

// templateVersionSK is the sort key of locale's version v: "L#{locale}#V#{%08d}".
func templateVersionSK(locale string, v int) string {
	return fmt.Sprintf("%s%0*d", templateLocalePrefix(locale), tplVersionDigits, v)
}

// templateLocalePrefix starts every sort key of locale's versions.
func templateLocalePrefix(locale string) string { return "L#" + locale + "#V#" }

type templateHeadItem struct {
	PK            string   `dynamodbav:"pk"`
	SK            string   `dynamodbav:"sk"`
	EntityType    string   `dynamodbav:"entityType"`
	Version       int      `dynamodbav:"version"`
	DefaultLocale string   `dynamodbav:"defaultLocale"`
	Locales       []string `dynamodbav:"locales,stringset"`
	UpdatedAt     int64    `dynamodbav:"updatedAt"`
}

type templateVersionItem struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EntityType string `dynamodbav:"entityType"`
	Version    int    `dynamodbav:"version"`
	Locale     string `dynamodbav:"locale"`
	Title      string `dynamodbav:"title"`
	Body       string `dynamodbav:"body"`
	CreatedAt  int64  `dynamodbav:"createdAt"`
	// The channels' parts are top-level map attributes named by their
	// inbox.ChannelSpec.Part ("email": {subject, html, text}, "push": {title, body},
	// "sms": {text}, "slack": {text}): partsAV writes them, decodeVersion reads them.
	parts map[string]inbox.Content
}

// partsAV adds the parts of channel parts to av, each as a map of its fields.
func partsAV(av map[string]types.AttributeValue, parts map[string]inbox.Content) {
	for _, c := range inbox.PartChannels {
		content, ok := parts[c]
		if !ok {
			continue
		}
		spec, _ := inbox.Spec(c)
		m := make(map[string]types.AttributeValue, len(spec.Fields))
		for _, f := range spec.Fields {
			m[f.Name] = &types.AttributeValueMemberS{Value: content.Field(f.Name)}
		}
		av[spec.Part] = &types.AttributeValueMemberM{Value: m}
	}
}

// decodeVersion reads a template version item, its parts included.
func decodeVersion(av map[string]types.AttributeValue) (*templateVersionItem, error) {
	var it templateVersionItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, fmt.Errorf("decode template version: %w", err)
	}
	for _, c := range inbox.PartChannels {
		spec, _ := inbox.Spec(c)
		m, ok := av[spec.Part].(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		var content inbox.Content
		for name, v := range m.Value {
			if sv, ok := v.(*types.AttributeValueMemberS); ok {
				content.SetField(name, sv.Value)
			}
		}
		if it.parts == nil {
			it.parts = map[string]inbox.Content{}
		}
		it.parts[c] = content
	}
	return &it, nil
}

// PutTemplate stores in as a new version of template id and returns the version (1 for
// the first PUT, then one more per PUT of any locale). The first PUT's locale becomes the
// template's default locale. One GetItem of HEAD (consistent) and one TransactWriteItems:
// Put HEAD with version+1 (condition: the version read, or no HEAD) + Put the version item
// (AP16); a concurrent PUT that took the version first makes this one read again, so
// concurrent PUTs get distinct versions. Errors: BAD_USER_INPUT for a bad id, locale,
// shape or size (see TemplateInput), or past inbox.MaxTemplateLocales / inbox.MaxTemplateVersion.
func (s *Store) PutTemplate(ctx context.Context, tenantID, id string, in inbox.TemplateInput) (int, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return 0, err
	}
	if err := inbox.CheckID("template id", id); err != nil {
		return 0, err
	}
	if in.Locale != "" {
		l, err := inbox.CanonicalLocale(in.Locale)
		if err != nil {
			return 0, err
		}
		in.Locale = l
	}
	if err := in.Check(); err != nil {
		return 0, err
	}
	pk := templatePK(tenantID, id)
	return retryConflicts(ctx, func() (int, error) {
		head, err := s.templateHead(ctx, pk)
		if err != nil {
			return 0, err
		}
		next := templateHeadItem{PK: pk, SK: skTemplateHead, EntityType: entityTemplate, DefaultLocale: inbox.DefaultTemplateLocale}
		if head != nil {
			next = *head
		}
		locale := in.Locale
		if locale == "" {
			locale = next.DefaultLocale
		}
		if head == nil {
			next.DefaultLocale = locale
		}
		if !slices.Contains(next.Locales, locale) {
			if len(next.Locales) >= inbox.MaxTemplateLocales {
				return 0, inbox.Errorf(inbox.CodeBadUserInput, "a template has at most %d locales", inbox.MaxTemplateLocales)
			}
			next.Locales = append(slices.Clone(next.Locales), locale)
		}
		if next.Version >= inbox.MaxTemplateVersion {
			return 0, inbox.Errorf(inbox.CodeBadUserInput, "template %q has reached its last version", id)
		}
		prev := next.Version
		next.Version++
		now := s.now()
		next.UpdatedAt = now.UnixMilli()
		ver := templateVersionItem{
			PK: pk, SK: templateVersionSK(locale, next.Version), EntityType: entityTemplateV,
			Version: next.Version, Locale: locale, Title: in.Title, Body: in.Body,
			CreatedAt: now.UnixMilli(),
		}
		headAV, err := attributevalue.MarshalMap(next)
		if err != nil {
			return 0, fmt.Errorf("marshal template head: %w", err)
		}
		verAV, err := attributevalue.MarshalMap(ver)
		if err != nil {
			return 0, fmt.Errorf("marshal template version: %w", err)
		}
		partsAV(verAV, in.Parts)
		headCond := itemAbsent()
		if head != nil {
			headCond = expression.Name(tplAttrVersion).Equal(expression.Value(prev))
		}
		headPut, err := condPut(s.table, headAV, headCond)
		if err != nil {
			return 0, err
		}
		verPut, err := condPut(s.table, verAV, itemAbsent())
		if err != nil {
			return 0, err
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: headPut},
			{Put: verPut},
		}})
		if err != nil {
			var tce *types.TransactionCanceledException
			switch {
			case lostRace(err):
				return 0, errRetry
			case errors.As(err, &tce):
				// Not a race (a validation error): retrying cannot help.
				return 0, fmt.Errorf("put template: %v", err)
			}
			return 0, fmt.Errorf("put template: %w", err)
		}
		return next.Version, nil
	})
}

// lostRace reports whether err cancelled a transaction only because of conditions or
// conflicts (another writer came first), which a re-read resolves.
func lostRace(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "", "None", "ConditionalCheckFailed", "TransactionConflict":
		default:
			return false
		}
	}
	return true
}

// templateHead reads HEAD (consistent GetItem), nil when the template does not exist.
func (s *Store) templateHead(ctx context.Context, pk string) (*templateHeadItem, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            itemKey{pk, skTemplateHead}.av(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get template head: %w", err)
	}
	if out.Item == nil {
		return nil, nil
	}
	var h templateHeadItem
	if err := attributevalue.UnmarshalMap(out.Item, &h); err != nil {
		return nil, fmt.Errorf("decode template head: %w", err)
	}
	return &h, nil
}

// errUnknownTemplate is the error of a template id without a HEAD.
func errUnknownTemplate(id string) error {
	return inbox.Errorf(inbox.CodeNotFound, "unknown template %q", id)
}

// GetTemplateHead returns template id's latest version, default locale and locales: one
// consistent GetItem of HEAD. A template that does not exist is NOT_FOUND "unknown
// template".
func (s *Store) GetTemplateHead(ctx context.Context, tenantID, id string) (inbox.TemplateHead, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return inbox.TemplateHead{}, err
	}
	if err := inbox.CheckID("template id", id); err != nil {
		return inbox.TemplateHead{}, err
	}
	h, err := s.templateHead(ctx, templatePK(tenantID, id))
	if err != nil {
		return inbox.TemplateHead{}, err
	}
	if h == nil {
		return inbox.TemplateHead{}, errUnknownTemplate(id)
	}
	locales := slices.Clone(h.Locales)
	slices.Sort(locales)
	return inbox.TemplateHead{Version: h.Version, DefaultLocale: h.DefaultLocale, Locales: locales}, nil
}

// GetTemplate returns the content of template id for locale at version: the newest
// version of that locale at or below version (0 = the latest). The locale is matched as
// given (canonical form), then by its base language ("de-AT" → "de"), then the template's
// default locale; locale "" is the default locale. One GetItem of HEAD and one Query per
// locale tried (AP17): usually one. Errors: BAD_USER_INPUT for a bad id, locale or version;
// NOT_FOUND for an unknown template or a version it does not have.
func (s *Store) GetTemplate(ctx context.Context, tenantID, id, locale string, version int) (inbox.Template, error) {
	if err := checkTemplateRef(tenantID, id); err != nil {
		return inbox.Template{}, err
	}
	if version < 0 || version > inbox.MaxTemplateVersion {
		return inbox.Template{}, inbox.Errorf(inbox.CodeBadUserInput, "version must be between 0 and %d", inbox.MaxTemplateVersion)
	}
	want := ""
	if locale != "" {
		l, err := inbox.CanonicalLocale(locale)
		if err != nil {
			return inbox.Template{}, err
		}
		want = l
	}
	pk := templatePK(tenantID, id)
	head, err := s.templateHead(ctx, pk)
	if err != nil {
		return inbox.Template{}, err
	}
	if head == nil {
		return inbox.Template{}, errUnknownTemplate(id)
	}
	if version == 0 {
		version = head.Version
	}
	if version > head.Version {
		return inbox.Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
	}
	var it *templateVersionItem
	for _, l := range routing.LocaleCandidates(want, head.Locales, head.DefaultLocale) {
		if it, err = s.templateVersionAtMost(ctx, pk, l, version); err != nil {
			return inbox.Template{}, err
		}
		if it != nil {
			break
		}
	}
	if it == nil {
		return inbox.Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
	}
	locales := slices.Clone(head.Locales)
	slices.Sort(locales)
	return inbox.Template{
		ID: id, Version: it.Version, Latest: head.Version,
		Locale: it.Locale, DefaultLocale: head.DefaultLocale, Locales: locales,
		TemplateInput: inbox.TemplateInput{Locale: it.Locale, Title: it.Title, Body: it.Body, Parts: it.parts},
		CreatedAt:     time.UnixMilli(it.CreatedAt).UTC(),
	}, nil
}

// GetTemplateLocale returns the content of exactly stored locale of template id at
// version: its newest version at or below version (1..inbox.MaxTemplateVersion), with no
// fallback and without reading HEAD, so Latest, DefaultLocale and Locales are zero. It is
// what a caller that resolved a locale itself (routing.LocaleCandidates over a
// TemplateHead) reads: one Query (AP17). Errors: BAD_USER_INPUT for a bad id, locale or
// version; NOT_FOUND when locale has no version at or below version (or the template does
// not exist).
func (s *Store) GetTemplateLocale(ctx context.Context, tenantID, id, locale string, version int) (inbox.Template, error) {
	if err := checkTemplateRef(tenantID, id); err != nil {
		return inbox.Template{}, err
	}
	if version < 1 || version > inbox.MaxTemplateVersion {
		return inbox.Template{}, inbox.Errorf(inbox.CodeBadUserInput, "version must be between 1 and %d", inbox.MaxTemplateVersion)
	}
	l, err := inbox.CanonicalLocale(locale)
	if err != nil {
		return inbox.Template{}, err
	}
	it, err := s.templateVersionAtMost(ctx, templatePK(tenantID, id), l, version)
	if err != nil {
		return inbox.Template{}, err
	}
	if it == nil {
		return inbox.Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version of locale %s at or below %d", id, l, version)
	}
	return inbox.Template{
		ID: id, Version: it.Version, Locale: it.Locale,
		TemplateInput: inbox.TemplateInput{Locale: it.Locale, Title: it.Title, Body: it.Body, Parts: it.parts},
		CreatedAt:     time.UnixMilli(it.CreatedAt).UTC(),
	}, nil
}

// templateVersionAtMost returns locale's newest version item at or below v, nil when
// there is none: one Query, sk BETWEEN L#{locale}#V#00000000 AND L#{locale}#V#{v},
// descending, Limit 1 (AP17).
func (s *Store) templateVersionAtMost(ctx context.Context, pk, locale string, v int) (*templateVersionItem, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pk},
			":lo": &types.AttributeValueMemberS{Value: templateVersionSK(locale, 0)},
			":hi": &types.AttributeValueMemberS{Value: templateVersionSK(locale, v)},
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(1),
	})
	if err != nil {
		return nil, fmt.Errorf("query template versions: %w", err)
	}
	if len(out.Items) == 0 {
		return nil, nil
	}
	return decodeVersion(out.Items[0])
}

// checkTemplateRef checks a template's tenant and id (BAD_USER_INPUT naming the bad one).
func checkTemplateRef(tenantID, id string) error {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return err
	}
	return inbox.CheckID("template id", id)
}
