package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/text/language"

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

// Limits of a template version.
const (
	// MaxTemplatePartBytes is the largest source of one part (title, body, email subject,
	// HTML or text, push title or body, SMS text).
	MaxTemplatePartBytes = 64 << 10
	// MaxTemplateBytes is the largest sum of the parts of one version (a DynamoDB item
	// holds at most 400 KB).
	MaxTemplateBytes = 192 << 10
	// MaxTemplateLocales is the most locales one template may have.
	MaxTemplateLocales = 50
	// MaxTemplateVersion is the highest version number (8 digits in the sort key).
	MaxTemplateVersion = 99_999_999
)

// DefaultTemplateLocale is the default locale of a template whose first PUT names none.
const DefaultTemplateLocale = "en"

// templatePK is the partition key of template id's items (AP16, AP17).
func templatePK(tenantID, id string) string { return "T#" + tenantID + "#TPL#" + id }

// templateVersionSK is the sort key of locale's version v: "L#{locale}#V#{%08d}".
func templateVersionSK(locale string, v int) string {
	return fmt.Sprintf("%s%0*d", templateLocalePrefix(locale), tplVersionDigits, v)
}

// templateLocalePrefix starts every sort key of locale's versions.
func templateLocalePrefix(locale string) string { return "L#" + locale + "#V#" }

// TemplateEmail is the email part of a template: Liquid sources.
type TemplateEmail struct {
	Subject string `dynamodbav:"subject"`
	HTML    string `dynamodbav:"html"`
	Text    string `dynamodbav:"text"`
}

// TemplatePush is the push part of a template: Liquid sources.
type TemplatePush struct {
	Title string `dynamodbav:"title"`
	Body  string `dynamodbav:"body"`
}

// TemplateSMS is the SMS part of a template: a Liquid source.
type TemplateSMS struct {
	Text string `dynamodbav:"text"`
}

// TemplateInput is one PUT of a template: the parts of one locale, Liquid sources. Title
// is required (the in-app notification's); a part that is nil is a channel the template
// does not define. Locale is a BCP 47 tag ("" = the template's default locale, or
// DefaultTemplateLocale on the first PUT); it is stored in its canonical form ("en-us" →
// "en-US"). The store checks sizes and shape, not the Liquid syntax (package tmpl does).
type TemplateInput struct {
	Locale string
	Title  string
	Body   string
	Email  *TemplateEmail
	Push   *TemplatePush
	SMS    *TemplateSMS
}

// Parts returns the named sources of in that are present, in a fixed order: "title",
// "body", "email.subject", "email.html", "email.text", "push.title", "push.body", "sms.text".
func (in TemplateInput) Parts() []TemplatePart {
	parts := []TemplatePart{{"title", in.Title}, {"body", in.Body}}
	if in.Email != nil {
		parts = append(parts, TemplatePart{"email.subject", in.Email.Subject}, TemplatePart{"email.html", in.Email.HTML}, TemplatePart{"email.text", in.Email.Text})
	}
	if in.Push != nil {
		parts = append(parts, TemplatePart{"push.title", in.Push.Title}, TemplatePart{"push.body", in.Push.Body})
	}
	if in.SMS != nil {
		parts = append(parts, TemplatePart{"sms.text", in.SMS.Text})
	}
	return parts
}

// TemplatePart is one named Liquid source of a template.
type TemplatePart struct {
	Name   string
	Source string
}

// Template is one stored version of one locale of a template.
type Template struct {
	ID string
	// Version is the version of this content; Latest the template's latest version (of
	// any locale) when it was read.
	Version int
	Latest  int
	// Locale is the locale of this content; DefaultLocale the template's; Locales every
	// locale the template has (sorted).
	Locale        string
	DefaultLocale string
	Locales       []string
	TemplateInput
	CreatedAt time.Time
}

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
	PK         string         `dynamodbav:"pk"`
	SK         string         `dynamodbav:"sk"`
	EntityType string         `dynamodbav:"entityType"`
	Version    int            `dynamodbav:"version"`
	Locale     string         `dynamodbav:"locale"`
	Title      string         `dynamodbav:"title"`
	Body       string         `dynamodbav:"body"`
	Email      *TemplateEmail `dynamodbav:"email,omitempty"`
	Push       *TemplatePush  `dynamodbav:"push,omitempty"`
	SMS        *TemplateSMS   `dynamodbav:"sms,omitempty"`
	CreatedAt  int64          `dynamodbav:"createdAt"`
}

// CanonicalLocale returns locale as a canonical BCP 47 tag ("en-us" → "en-US"), or
// BAD_USER_INPUT when it is not one (or could not be part of a key).
func CanonicalLocale(locale string) (string, error) {
	tag, err := language.Parse(locale)
	if err != nil {
		return "", inbox.Errorf(inbox.CodeBadUserInput, "locale %q is not a known BCP 47 language tag", locale)
	}
	s := tag.String()
	if err := inbox.CheckID("locale", s); err != nil {
		return "", err
	}
	return s, nil
}

// checkTemplateInput checks the shape and size of in (locale already canonical).
func checkTemplateInput(in TemplateInput) error {
	if strings.TrimSpace(in.Title) == "" {
		return inbox.Errorf(inbox.CodeBadUserInput, "a template needs a title")
	}
	total := 0
	for _, p := range in.Parts() {
		if len(p.Source) > MaxTemplatePartBytes {
			return inbox.Errorf(inbox.CodeBadUserInput, "template part %s is over %d bytes", p.Name, MaxTemplatePartBytes)
		}
		total += len(p.Source)
	}
	if total > MaxTemplateBytes {
		return inbox.Errorf(inbox.CodeBadUserInput, "a template version is over %d bytes", MaxTemplateBytes)
	}
	switch {
	case in.Email != nil && strings.TrimSpace(in.Email.Subject) == "":
		return inbox.Errorf(inbox.CodeBadUserInput, "a template's email needs a subject")
	case in.Email != nil && in.Email.HTML == "" && in.Email.Text == "":
		return inbox.Errorf(inbox.CodeBadUserInput, "a template's email needs html or text")
	case in.Push != nil && in.Push.Title == "" && in.Push.Body == "":
		return inbox.Errorf(inbox.CodeBadUserInput, "a template's push needs a title or a body")
	case in.SMS != nil && strings.TrimSpace(in.SMS.Text) == "":
		return inbox.Errorf(inbox.CodeBadUserInput, "a template's sms needs text")
	}
	return nil
}

// PutTemplate stores in as a new version of template id and returns the version (1 for
// the first PUT, then one more per PUT of any locale). The first PUT's locale becomes the
// template's default locale. One GetItem of HEAD (consistent) and one TransactWriteItems:
// Put HEAD with version+1 (condition: the version read, or no HEAD) + Put the version item
// (AP16); a concurrent PUT that took the version first makes this one read again, so
// concurrent PUTs get distinct versions. Errors: BAD_USER_INPUT for a bad id, locale,
// shape or size (see TemplateInput), or past MaxTemplateLocales / MaxTemplateVersion.
func (s *Store) PutTemplate(ctx context.Context, tenantID, id string, in TemplateInput) (int, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return 0, err
	}
	if err := inbox.CheckID("template id", id); err != nil {
		return 0, err
	}
	if in.Locale != "" {
		l, err := CanonicalLocale(in.Locale)
		if err != nil {
			return 0, err
		}
		in.Locale = l
	}
	if err := checkTemplateInput(in); err != nil {
		return 0, err
	}
	pk := templatePK(tenantID, id)
	return retryConflicts(ctx, func() (int, error) {
		head, err := s.templateHead(ctx, pk)
		if err != nil {
			return 0, err
		}
		next := templateHeadItem{PK: pk, SK: skTemplateHead, EntityType: entityTemplate, DefaultLocale: DefaultTemplateLocale}
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
			if len(next.Locales) >= MaxTemplateLocales {
				return 0, inbox.Errorf(inbox.CodeBadUserInput, "a template has at most %d locales", MaxTemplateLocales)
			}
			next.Locales = append(slices.Clone(next.Locales), locale)
		}
		if next.Version >= MaxTemplateVersion {
			return 0, inbox.Errorf(inbox.CodeBadUserInput, "template %q has reached its last version", id)
		}
		prev := next.Version
		next.Version++
		now := s.now()
		next.UpdatedAt = now.UnixMilli()
		ver := templateVersionItem{
			PK: pk, SK: templateVersionSK(locale, next.Version), EntityType: entityTemplateV,
			Version: next.Version, Locale: locale, Title: in.Title, Body: in.Body,
			Email: in.Email, Push: in.Push, SMS: in.SMS, CreatedAt: now.UnixMilli(),
		}
		headAV, err := attributevalue.MarshalMap(next)
		if err != nil {
			return 0, fmt.Errorf("marshal template head: %w", err)
		}
		verAV, err := attributevalue.MarshalMap(ver)
		if err != nil {
			return 0, fmt.Errorf("marshal template version: %w", err)
		}
		headPut := &types.Put{TableName: aws.String(s.table), Item: headAV}
		if head == nil {
			headPut.ConditionExpression = aws.String("attribute_not_exists(" + attrPK + ")")
		} else {
			headPut.ConditionExpression = aws.String("#v = :v")
			headPut.ExpressionAttributeNames = map[string]string{"#v": tplAttrVersion}
			headPut.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: fmt.Sprint(prev)}}
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: headPut},
			{Put: &types.Put{TableName: aws.String(s.table), Item: verAV, ConditionExpression: aws.String("attribute_not_exists(" + attrPK + ")")}},
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

// TemplateHead is what a template's HEAD says.
type TemplateHead struct {
	// Version is the latest version (of any locale).
	Version       int
	DefaultLocale string
	// Locales are every locale with a version, sorted.
	Locales []string
}

// GetTemplateHead returns template id's latest version, default locale and locales: one
// consistent GetItem of HEAD. A template that does not exist is NOT_FOUND "unknown
// template".
func (s *Store) GetTemplateHead(ctx context.Context, tenantID, id string) (TemplateHead, error) {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return TemplateHead{}, err
	}
	if err := inbox.CheckID("template id", id); err != nil {
		return TemplateHead{}, err
	}
	h, err := s.templateHead(ctx, templatePK(tenantID, id))
	if err != nil {
		return TemplateHead{}, err
	}
	if h == nil {
		return TemplateHead{}, errUnknownTemplate(id)
	}
	locales := slices.Clone(h.Locales)
	slices.Sort(locales)
	return TemplateHead{Version: h.Version, DefaultLocale: h.DefaultLocale, Locales: locales}, nil
}

// GetTemplate returns the content of template id for locale at version: the newest
// version of that locale at or below version (0 = the latest). The locale is matched as
// given (canonical form), then by its base language ("de-AT" → "de"), then the template's
// default locale; locale "" is the default locale. One GetItem of HEAD and one Query per
// locale tried (AP17): usually one. Errors: BAD_USER_INPUT for a bad id, locale or version;
// NOT_FOUND for an unknown template or a version it does not have.
func (s *Store) GetTemplate(ctx context.Context, tenantID, id, locale string, version int) (Template, error) {
	if err := checkTemplateRef(tenantID, id); err != nil {
		return Template{}, err
	}
	if version < 0 || version > MaxTemplateVersion {
		return Template{}, inbox.Errorf(inbox.CodeBadUserInput, "version must be between 0 and %d", MaxTemplateVersion)
	}
	want := ""
	if locale != "" {
		l, err := CanonicalLocale(locale)
		if err != nil {
			return Template{}, err
		}
		want = l
	}
	pk := templatePK(tenantID, id)
	head, err := s.templateHead(ctx, pk)
	if err != nil {
		return Template{}, err
	}
	if head == nil {
		return Template{}, errUnknownTemplate(id)
	}
	if version == 0 {
		version = head.Version
	}
	if version > head.Version {
		return Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
	}
	var it *templateVersionItem
	for _, l := range routing.LocaleCandidates(want, head.Locales, head.DefaultLocale) {
		if it, err = s.templateVersionAtMost(ctx, pk, l, version); err != nil {
			return Template{}, err
		}
		if it != nil {
			break
		}
	}
	if it == nil {
		return Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version %d", id, version)
	}
	locales := slices.Clone(head.Locales)
	slices.Sort(locales)
	return Template{
		ID: id, Version: it.Version, Latest: head.Version,
		Locale: it.Locale, DefaultLocale: head.DefaultLocale, Locales: locales,
		TemplateInput: TemplateInput{Locale: it.Locale, Title: it.Title, Body: it.Body, Email: it.Email, Push: it.Push, SMS: it.SMS},
		CreatedAt:     time.UnixMilli(it.CreatedAt).UTC(),
	}, nil
}

// GetTemplateLocale returns the content of exactly stored locale of template id at
// version: its newest version at or below version (1..MaxTemplateVersion), with no
// fallback and without reading HEAD, so Latest, DefaultLocale and Locales are zero. It is
// what a caller that resolved a locale itself (routing.LocaleCandidates over a
// TemplateHead) reads: one Query (AP17). Errors: BAD_USER_INPUT for a bad id, locale or
// version; NOT_FOUND when locale has no version at or below version (or the template does
// not exist).
func (s *Store) GetTemplateLocale(ctx context.Context, tenantID, id, locale string, version int) (Template, error) {
	if err := checkTemplateRef(tenantID, id); err != nil {
		return Template{}, err
	}
	if version < 1 || version > MaxTemplateVersion {
		return Template{}, inbox.Errorf(inbox.CodeBadUserInput, "version must be between 1 and %d", MaxTemplateVersion)
	}
	l, err := CanonicalLocale(locale)
	if err != nil {
		return Template{}, err
	}
	it, err := s.templateVersionAtMost(ctx, templatePK(tenantID, id), l, version)
	if err != nil {
		return Template{}, err
	}
	if it == nil {
		return Template{}, inbox.Errorf(inbox.CodeNotFound, "template %q has no version of locale %s at or below %d", id, l, version)
	}
	return Template{
		ID: id, Version: it.Version, Locale: it.Locale,
		TemplateInput: TemplateInput{Locale: it.Locale, Title: it.Title, Body: it.Body, Email: it.Email, Push: it.Push, SMS: it.SMS},
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
	var it templateVersionItem
	if err := attributevalue.UnmarshalMap(out.Items[0], &it); err != nil {
		return nil, fmt.Errorf("decode template version: %w", err)
	}
	return &it, nil
}

// checkTemplateRef checks a template's tenant and id (BAD_USER_INPUT naming the bad one).
func checkTemplateRef(tenantID, id string) error {
	if err := inbox.CheckID("tenant", tenantID); err != nil {
		return err
	}
	return inbox.CheckID("template id", id)
}
