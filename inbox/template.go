package inbox

import (
	"strings"
	"time"

	"golang.org/x/text/language"
)

// Limits of a template version.
const (
	// MaxTemplatePartBytes is the largest source of one part (title, body, or one field
	// of a channel's part: an email's subject, HTML or text, ...).
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

// TemplateInput is one PUT of a template: the parts of one locale, Liquid sources. Title
// is required (the in-app notification's). Parts are the channels' parts by channel
// (PartChannels; the fields each ChannelSpec names); a channel missing is one the
// template does not define. Locale is a BCP 47 tag ("" = the template's default locale,
// or DefaultTemplateLocale on the first PUT), stored in its canonical form ("en-us" →
// "en-US").
type TemplateInput struct {
	Locale string
	Title  string
	Body   string
	Parts  map[string]Content
}

// TemplatePart is one named Liquid source of a template: "title", "body", or
// "<part>.<field>" ("email.subject").
type TemplatePart struct {
	Name   string
	Source string
	// Escape is the escaping of the source's outputs at render (PartField.Escape; nil:
	// none).
	Escape *Escaping
}

// Sources returns the named sources of in that are present, in a fixed order: "title",
// "body", then each channel's part in Channels order, its fields in ChannelSpec order
// ("email.subject", "email.html", "email.text", "push.title", "push.body", "sms.text",
// "slack.text").
func (in TemplateInput) Sources() []TemplatePart {
	parts := []TemplatePart{{Name: "title", Source: in.Title}, {Name: "body", Source: in.Body}}
	for _, c := range PartChannels {
		content, ok := in.Parts[c]
		if !ok {
			continue
		}
		s, _ := Spec(c)
		for _, f := range s.Fields {
			parts = append(parts, TemplatePart{Name: s.Part + "." + f.Name, Source: content.Field(f.Name), Escape: f.Escape})
		}
	}
	return parts
}

// Check checks the shape and size of in: a title, every source within
// MaxTemplatePartBytes and all of them within MaxTemplateBytes, only channels that have
// a part, and each part as its ChannelSpec.Check wants it. It does not parse the Liquid
// (package tmpl does). Errors: BAD_USER_INPUT naming what is wrong.
func (in TemplateInput) Check() error {
	if strings.TrimSpace(in.Title) == "" {
		return Errorf(CodeBadUserInput, "a template needs a title")
	}
	for c := range in.Parts {
		if s, ok := Spec(c); !ok || s.Part == "" {
			return Errorf(CodeBadUserInput, "a template has no part for channel %q", c)
		}
	}
	total := 0
	for _, p := range in.Sources() {
		if len(p.Source) > MaxTemplatePartBytes {
			return Errorf(CodeBadUserInput, "template part %s is over %d bytes", p.Name, MaxTemplatePartBytes)
		}
		total += len(p.Source)
	}
	if total > MaxTemplateBytes {
		return Errorf(CodeBadUserInput, "a template version is over %d bytes", MaxTemplateBytes)
	}
	for _, c := range PartChannels {
		content, ok := in.Parts[c]
		if !ok {
			continue
		}
		if s, _ := Spec(c); s.Check != nil {
			if msg := s.Check(content); msg != "" {
				return Errorf(CodeBadUserInput, "a template's %s", msg)
			}
		}
	}
	return nil
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

// TemplateHead is what a template's HEAD says.
type TemplateHead struct {
	// Version is the latest version (of any locale).
	Version       int
	DefaultLocale string
	// Locales are every locale with a version, sorted.
	Locales []string
}

// CanonicalLocale returns locale as a canonical BCP 47 tag ("en-us" → "en-US"), or
// BAD_USER_INPUT when it is not one (or could not be part of a key).
func CanonicalLocale(locale string) (string, error) {
	tag, err := language.Parse(locale)
	if err != nil {
		return "", Errorf(CodeBadUserInput, "locale %q is not a known BCP 47 language tag", locale)
	}
	s := tag.String()
	if err := CheckID("locale", s); err != nil {
		return "", err
	}
	return s, nil
}
