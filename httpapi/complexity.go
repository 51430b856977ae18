package httpapi

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/inboxgw/gateway/graph"
	"github.com/inboxgw/gateway/graph/model"
	"github.com/inboxgw/gateway/inbox"
)

// The cost model of the complexity limit (issue 8, item 5: a document must cost what it
// reaches in DynamoDB, not what it says). gqlgen sums a cost per selected field, aliases
// included, and refuses a document over the limit (INBOX_COMPLEXITY_LIMIT, default 5000)
// before anything runs, with extensions.code COMPLEXITY_LIMIT_EXCEEDED. A field without a
// cost below costs 1 plus its children.
//
// A field that reads DynamoDB on its own costs CostRead = 100, so a document under the
// default limit makes at most 50 such reads (repeats of one read are served once per
// operation, but every alias is charged, so 50 aliases of viewer { unreadCount } are
// refused). The largest legitimate documents stay far below: a first page of 100
// notifications with actors, targets and the badge costs about 2,200; nodes of 100 ids
// with their actors about 1,300; markRead of 99 ids returning them about 2,000.
const (
	// CostRead is the cost of a field that reaches DynamoDB with a call of its own (a
	// GetItem, Query or BatchGetItem): Viewer.unreadCount, Viewer.inbox,
	// Viewer.notification, Query.node, Query.nodes, Notification.deliveries.
	CostRead = 100
	// CostFilteredRead is the cost of an inbox or groups page with a filter that may skip
	// items: a page that matches sparsely reads on until it is full (45 aliases of first: 1
	// over 1,500 notifications of 12 KB made 405 Query calls in one request, when the type
	// filter was a FilterExpression). A type alone now reads its own index (GSI2), but
	// archived, snoozed, category and unread still skip within it, and a groups page
	// filters types with a FilterExpression. It counts as ten reads: at most four such
	// pages fit in a document.
	CostFilteredRead = 1000
	// CostProfile is the cost of Notification.actor and Notification.target: read for a
	// whole page in one BatchGetItem, so cheap per notification, but not free.
	CostProfile = 2
	// CostWrite is the cost of a mutation field (at most MutationLimit.Max of them run).
	CostWrite = 50
	// CostPerID is what markRead and markUnread add per id and sendNotification per
	// recipient (each a transaction item).
	CostPerID = 10
)

// Complexity is the cost of each field that reaches DynamoDB (see CostRead, CostProfile,
// CostWrite, CostPerID); list fields multiply their children's cost by their size (a page's first
// or last, default inbox.DefaultPageSize; the number of ids).
func Complexity() graph.ComplexityRoot {
	var c graph.ComplexityRoot
	c.Viewer.Inbox = func(childComplexity int, first *int, _ *string, last *int, _ *string, filter *model.InboxFilter) int {
		n := inbox.DefaultPageSize
		if first != nil {
			n = *first
		} else if last != nil {
			n = *last
		}
		// Out-of-range sizes are refused by the resolver with BAD_USER_INPUT; clamp them
		// here so the complexity check does not answer first with another error.
		return filteredRead(filter, false) + min(max(n, 1), inbox.MaxPageSize)*childComplexity
	}
	c.Viewer.Groups = func(childComplexity int, first *int, _ *string, filter *model.InboxFilter) int {
		n := inbox.DefaultPageSize
		if first != nil {
			n = *first
		}
		return filteredRead(filter, true) + min(max(n, 1), inbox.MaxPageSize)*childComplexity
	}
	c.Viewer.UnseenCount = func(childComplexity int) int { return CostRead + childComplexity }
	c.Viewer.Badge = func(childComplexity int) int { return CostRead + childComplexity }
	c.Viewer.Preferences = func(childComplexity int) int { return CostRead + childComplexity }
	c.Preferences.MutedTargets = func(childComplexity int) int { return CostRead + 10*childComplexity }
	c.Viewer.UnreadCount = func(childComplexity int) int { return CostRead + childComplexity }
	c.Viewer.Notification = func(childComplexity int, _ string) int { return CostRead + childComplexity }
	c.Query.Node = func(childComplexity int, _ string) int { return CostRead + childComplexity }
	c.Query.Nodes = func(childComplexity int, ids []string) int {
		return CostRead + min(max(len(ids), 1), 100)*childComplexity
	}
	// Each notification's deliveries are a Query of their own (its status partition): a
	// page of 20 notifications with deliveries costs 20 reads more.
	c.Notification.Deliveries = func(childComplexity int) int { return CostRead + childComplexity }
	c.Notification.Actor = func(childComplexity int) int { return CostProfile + childComplexity }
	c.Notification.Target = func(childComplexity int) int { return CostProfile + childComplexity }
	// The payload's notifications list has one entry per distinct id.
	mark := func(childComplexity int, ids []string) int {
		n := min(len(ids), 100)
		return CostWrite + n*CostPerID + max(n, 1)*childComplexity
	}
	c.Mutation.MarkRead = mark
	c.Mutation.MarkUnread = mark
	c.Mutation.MarkSeen = mark
	c.Mutation.Archive = mark
	c.Mutation.Unarchive = mark
	c.Mutation.Unsnooze = mark
	c.Mutation.DeleteNotifications = mark
	c.Mutation.Snooze = func(childComplexity int, ids []string, _ time.Time) int { return mark(childComplexity, ids) }
	c.Mutation.MarkAllRead = func(childComplexity int, _ *model.MarkAllFilter) int { return CostWrite + childComplexity }
	c.Mutation.MarkAllSeen = func(childComplexity int) int { return CostWrite + childComplexity }
	c.Mutation.UpdatePreferences = func(childComplexity int, _ model.PreferencesInput) int { return CostWrite + childComplexity }
	c.Mutation.SendNotification = func(childComplexity int, in model.SendNotificationInput) int {
		// Recipients beyond a store chunk (inbox.MaxRecipients) are written by the send
		// service's bounded lanes, not by this request: a 1,000-recipient send fits the
		// default limit.
		return CostWrite + min(len(in.Recipients), inbox.MaxRecipients)*CostPerID + childComplexity
	}
	return c
}

// filteredRead is the cost of reading a page under filter (groups when groups is true).
// An inbox page filtered by types reads one GSI2 Query per distinct type and META's
// GetItem: CostRead each, or CostFilteredRead per type when another filter (categories,
// archived, unread) may make that type's Query read on; so four aliased pages of 20
// types cost 8,400 and are refused, not 84 Queries. Any other filter that may skip items
// reads on through the inbox until the page is full (CostFilteredRead), no filter
// CostRead. A groups page filters types with a FilterExpression: one filtered read.
func filteredRead(filter *model.InboxFilter, groups bool) int {
	if filter == nil {
		return CostRead
	}
	skips := len(filter.Categories) > 0 || (filter.Archived != nil && *filter.Archived != model.ArchivedFilterExclude)
	if len(filter.Types) > 0 && !groups {
		// Distinct types, at most one past the limit: a longer list is BAD_USER_INPUT
		// (inbox.Validate), answered as such rather than as COMPLEXITY_LIMIT_EXCEEDED.
		k := min(len(slices.Compact(slices.Sorted(slices.Values(filter.Types)))), inbox.MaxFilterTypes+1)
		perType := CostRead
		if skips || (filter.UnreadOnly != nil && *filter.UnreadOnly) {
			perType = CostFilteredRead
		}
		return CostRead + k*perType
	}
	if skips || len(filter.Types) > 0 {
		return CostFilteredRead
	}
	return CostRead
}

// DefaultMaxMutationFields is how many mutation fields a document may carry when
// Options.MaxMutationFields is not set (INBOX_MAX_MUTATION_FIELDS).
const DefaultMaxMutationFields = 5

// MutationLimit refuses, before anything runs, a mutation document with more than Max
// root fields, aliases included (a document with 500 aliased markRead fields ran 500
// transactions: issue 8, item 5). The error is BAD_USER_INPUT, with no data, answered
// like the complexity limit's (the same HTTP status). Fields skipped by @skip or @include
// do not count.
type MutationLimit struct {
	// Max is the most mutation fields a document may carry (at least 1).
	Max int
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = MutationLimit{}

// ExtensionName names the extension in gqlgen's registry.
func (MutationLimit) ExtensionName() string { return "MutationLimit" }

// Validate checks the limit.
func (m MutationLimit) Validate(graphql.ExecutableSchema) error {
	if m.Max < 1 {
		return fmt.Errorf("mutation field limit must be at least 1, not %d", m.Max)
	}
	return nil
}

// MutateOperationContext counts the operation's mutation fields.
func (m MutationLimit) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Mutation {
		return nil
	}
	n := 0
	for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Mutation"}) {
		if f.Name != "__typename" {
			n++
		}
	}
	if n <= m.Max {
		return nil
	}
	err := gqlerror.Errorf("a document may carry at most %d mutation fields (aliases count); this one has %d", m.Max, n)
	err.Extensions = map[string]any{"code": inbox.CodeBadUserInput}
	return err
}

// MaxExpandedSelections bounds the field selections of an operation once its fragment
// spreads are expanded. gqlgen's complexity walk (and graphql.CollectFields) expands
// every spread anew, so a document under the token limit whose fragments each spread the
// next one twice (1.2 KB, 30 fragments, 2^30 selections) kept a core busy for 100 s
// before the complexity limit refused it, long after its client had gone. A document
// within ParserTokenLimit without reused fragments has fewer than 5,000 selections; this
// leaves room for fragments shared by many fields and stays a few milliseconds of work.
const MaxExpandedSelections = 50_000

// spreadLimit refuses, before the complexity limit walks it, an operation whose fragment
// spreads expand to more than Max field selections, with the complexity limit's code. It
// counts each fragment once (memoized, saturating at Max), so its own work is linear in
// the document.
type spreadLimit struct{ Max int }

func (spreadLimit) ExtensionName() string { return "SpreadLimit" }

func (spreadLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (l spreadLimit) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Doc == nil {
		return nil
	}
	memo := map[string]int{}
	if n := expandedSelections(oc.Operation.SelectionSet, oc.Doc.Fragments, memo, l.Max); n <= l.Max {
		return nil
	}
	err := gqlerror.Errorf("operation expands to more than %d field selections through its fragments", l.Max)
	err.Extensions = map[string]any{"code": "COMPLEXITY_LIMIT_EXCEEDED"}
	return err
}

// expandedSelections counts the fields of set with every fragment spread expanded,
// returning max+1 as soon as the count passes max.
func expandedSelections(set ast.SelectionSet, frags ast.FragmentDefinitionList, memo map[string]int, max int) int {
	total := 0
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			total += 1 + expandedSelections(s.SelectionSet, frags, memo, max)
		case *ast.InlineFragment:
			total += expandedSelections(s.SelectionSet, frags, memo, max)
		case *ast.FragmentSpread:
			n, ok := memo[s.Name]
			if !ok {
				memo[s.Name] = max + 1 // a cycle (validation refuses them) counts as too many
				if f := frags.ForName(s.Name); f != nil {
					n = expandedSelections(f.SelectionSet, frags, memo, max)
				} else {
					n = 0
				}
				memo[s.Name] = n
			}
			total += n
		}
		if total > max {
			return max + 1
		}
	}
	return total
}

// singleSubscriptionField refuses a subscription whose root selects more than one response
// key (GRAPHQL_VALIDATION_FAILED, as the spec's "single root field" rule has it).
// gqlparser's rule compares field names, so "subscription { a: unreadCount b: unreadCount }"
// passed validation and gqlgen's executor refused it with an uncoded error: an
// INTERNAL_SERVER_ERROR logged at ERROR, for any client, without a token. It runs after
// spreadLimit (CollectFields expands every spread).
type singleSubscriptionField struct{}

func (singleSubscriptionField) ExtensionName() string { return "SingleSubscriptionField" }

func (singleSubscriptionField) Validate(graphql.ExecutableSchema) error { return nil }

func (singleSubscriptionField) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return nil
	}
	if n := len(graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Subscription"})); n == 1 {
		return nil
	}
	err := gqlerror.Errorf("a subscription must select exactly one root field (aliases count)")
	errcode.Set(err, errcode.ValidationFailed)
	return err
}
