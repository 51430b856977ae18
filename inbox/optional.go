package inbox

// Optional fields: the GraphQL schema renders an empty optional string as null, not "".
// These accessors give the nullable view of each optional field (the schema binds to them).

// optional returns s, a field of the caller's value, or nil when it is empty. It points
// into the value rather than at a copy (no allocation per rendered field): the GraphQL
// layer only reads it, while the value is rendered.
func optional(s *string) *string {
	if *s == "" {
		return nil
	}
	return s
}

// OptCategory is Category, nil when empty.
func (n *Notification) OptCategory() *string { return optional(&n.Category) }

// OptTitle is Title, nil when empty.
func (n *Notification) OptTitle() *string { return optional(&n.Title) }

// OptBody is Body, nil when empty.
func (n *Notification) OptBody() *string { return optional(&n.Body) }

// OptName is Name, nil when empty.
func (a *Actor) OptName() *string { return optional(&a.Name) }

// OptAvatarURL is AvatarURL, nil when empty.
func (a *Actor) OptAvatarURL() *string { return optional(&a.AvatarURL) }

// OptURL is URL, nil when empty.
func (a *Actor) OptURL() *string { return optional(&a.URL) }

// OptTitle is Title, nil when empty.
func (t *Target) OptTitle() *string { return optional(&t.Title) }

// OptURL is URL, nil when empty.
func (t *Target) OptURL() *string { return optional(&t.URL) }

// OptGroupKey is GroupKey for GraphQL: nil when empty.
func (n *Notification) OptGroupKey() *string { return optional(&n.GroupKey) }

// OptTimezone is Timezone for GraphQL: nil when unset.
func (p *Preferences) OptTimezone() *string { return optional(&p.Timezone) }

// OptLocale is Locale for GraphQL: nil when unset.
func (p *Preferences) OptLocale() *string { return optional(&p.Locale) }
