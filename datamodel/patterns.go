package datamodel

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/sync/errgroup"

	"github.com/inboxgw/gateway/inbox"
	"github.com/inboxgw/gateway/routing"
	"github.com/inboxgw/gateway/service"
	"github.com/inboxgw/gateway/store"
	"github.com/inboxgw/gateway/tmpl"
)

// The seed's ids. Every id has a fixed length, so the items, and so the capacity
// DynamoDB Local reports for them, are the same on every run.
const (
	tenant = "acme"
	// reader's inbox serves the page, badge, state and group patterns; typed's holds
	// the type filter's 300 + 5 notifications.
	reader = "user0001"
	typed  = "user0002"
	// commonType and rareType are typed's two types: commonCount and rareCount of them.
	commonType  = "comment"
	rareType    = "mention"
	commonCount = 300
	rareCount   = 5
	// readerCount notifications are sent to reader, groupEvery-th of them into a group.
	readerCount = 30
	groupEvery  = 3
	segment     = "followers"
	// segmentSize users follow; a broadcast pages through them.
	segmentSize = 24
	template    = "welcome"
)

// start is the model's clock: it never moves unless a pattern moves it, so every
// timestamp written has the same length and value on every run.
var start = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// env is what the patterns run on: the components the gateway composes (package app's
// Build), over one recorded client.
type env struct {
	db    *dynamodb.Client
	table string
	st    *store.Store
	svc   *service.Service
	bc    *service.Broadcasts
	ann   *service.Announcements
	tpl   *tmpl.Service
	clock *clock
	rec   *Recorder
	log   *slog.Logger // the components' warnings

	// Filled by the seed and by earlier patterns.
	sent       []string // reader's notification ids, oldest first
	emailNotif []string // notifications with a QUEUED email record (pattern 8's send)
	emailUsers []string
	broadcast  string
}

// Pattern is one row of the README's access-pattern table and the code that runs it.
type Pattern struct {
	// N is the pattern's number in the README's table; Name its short name.
	N    int
	Name string
	// What is what the pattern does, as the README's table says it.
	What string
	// run runs the pattern through the gateway's own code (store, service, scheduler).
	run func(ctx context.Context, e *env) error
}

func user(n int) string { return fmt.Sprintf("user%04d", n) }

func viewer(u string) inbox.Viewer { return inbox.Viewer{TenantID: tenant, UserID: u} }

func ptr[T any](v T) *T { return &v }

// seed writes the data set the patterns read, through the same code paths (not
// recorded).
func seed(ctx context.Context, e *env) error {
	// typed's inbox is the seed's longest part: it is written beside the rest (other
	// partitions; each inbox's own writes stay in order, and the ULIDs' values, which
	// interleave, never reach the note).
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := seedTyped(ctx, e); err != nil {
			return fmt.Errorf("seed typed: %w", err)
		}
		return nil
	})
	g.Go(func() error { return seedRest(ctx, e) })
	return g.Wait()
}

// seedRest writes the template, the users' profiles, reader's inbox and the segment.
func seedRest(ctx context.Context, e *env) error {
	if _, err := e.tpl.Put(ctx, tenant, template, inbox.TemplateInput{Locale: "en", Title: "Welcome {{ name }}",
		Body:  "Hello {{ name }}, glad you are here.",
		Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "Welcome {{ name }}", Text: "Hello {{ name }}."}}}); err != nil {
		return fmt.Errorf("seed template: %w", err)
	}
	for n := 3; n <= 6; n++ {
		if _, err := e.st.PutUserProfile(ctx, viewer(user(n)), inbox.UserProfile{
			Addresses: map[string]string{"email": user(n) + "@example.com"}, Locale: "en", Timezone: "Europe/Paris"}); err != nil {
			return fmt.Errorf("seed profile: %w", err)
		}
	}
	w := service.Writer{Store: e.st}
	for i := range readerCount {
		in := inbox.SendInput{IdempotencyKey: fmt.Sprintf("seed-reader-%04d", i), Recipients: []string{reader},
			Type: commonType, Category: "social", Title: fmt.Sprintf("Comment %04d on your post", i), Body: "A reply to your post.",
			Actor:  &inbox.Actor{ActorID: fmt.Sprintf("actor%04d", i%4), Name: fmt.Sprintf("Actor %04d", i%4)},
			Target: &inbox.Target{TargetID: "post0001", Kind: "post", Title: "A post"}}
		if i%groupEvery == 0 {
			in.GroupKey = fmt.Sprintf("thread%04d", i%2)
		}
		res, err := w.Send(ctx, tenant, in)
		if err != nil {
			return fmt.Errorf("seed reader: %w", err)
		}
		e.sent = append(e.sent, res.NotificationIDs...)
	}
	members := make([]string, segmentSize)
	for i := range members {
		members[i] = user(100 + i)
	}
	if _, err := e.st.UpdateSegment(ctx, tenant, segment, members, nil); err != nil {
		return fmt.Errorf("seed segment: %w", err)
	}
	return nil
}

// seedTyped writes typed's inbox: rareCount notifications of rareType, the oldest, then
// commonCount of commonType above them, so a page of the rare type reads the whole inbox
// to fill. Each is the store's per-recipient transaction (WriteRecipient, as a send
// writes it), after one read of the recipient: the send's guards and read would only
// triple the seed's time.
func seedTyped(ctx context.Context, e *env) error {
	read, err := e.st.ReadRecipients(ctx, tenant, []string{typed}, routing.Need{})
	if err != nil {
		return err
	}
	for i := range rareCount + commonCount {
		typ := commonType
		if i < rareCount {
			typ = rareType
		}
		in := inbox.SendInput{IdempotencyKey: fmt.Sprintf("seed-typed-%04d", i), Recipients: []string{typed},
			Type: typ, Category: "social", Title: fmt.Sprintf("Notification %04d", i), Body: "Something happened."}
		if _, err := e.st.WriteRecipient(ctx, routing.Plan{TenantID: tenant, UserID: typed, Send: in, InputHash: "seed",
			Decisions: routing.Decide(in, read.Tenant, read.Recipients[typed], read.At)}); err != nil {
			return err
		}
	}
	return nil
}

// Patterns are the README's access patterns, in its order.
var Patterns = []Pattern{
	{1, "newest page + badge", "One Query of the user's collection, `sk BETWEEN N# AND N~META` descending: META (the badge) first, then the page.", func(ctx context.Context, e *env) error {
		_, err := e.st.Inbox(ctx, viewer(reader), inbox.PageQuery{First: ptr(10)})
		return err
	}},
	{2, "later page", "The same Query from the cursor (ExclusiveStartKey), then ONE BatchGetItem of META and the page's actors and targets (a page rendering no profile: a GetItem of META sent concurrently with the Query).", func(ctx context.Context, e *env) error {
		e.rec.Begin(0)
		p, err := e.st.Inbox(ctx, viewer(reader), inbox.PageQuery{First: ptr(10)})
		if err != nil {
			return err
		}
		e.rec.Begin(2)
		_, err = e.st.Inbox(ctx, viewer(reader), inbox.PageQuery{First: ptr(10), After: *p.PageInfo.EndCursor, Profiles: true})
		return err
	}},
	{3, "badge alone", "GetItem of META.", func(ctx context.Context, e *env) error {
		_, err := e.st.Badge(ctx, viewer(reader))
		return err
	}},
	{4, "unread only", "The page's Query on GSI1's `…#UNREAD` partition (active, possibly unread notifications and META).", func(ctx context.Context, e *env) error {
		_, err := e.st.Inbox(ctx, viewer(reader), inbox.PageQuery{First: ptr(10), UnreadOnly: true})
		return err
	}},
	{5, "type filter (5 of one type among 300 of another)", "The page's Query with the type filter (`Types`), following LastEvaluatedKey until the page is full: as the store runs `Inbox` with `Types` (the calls below say how).", func(ctx context.Context, e *env) error {
		p, err := e.st.Inbox(ctx, viewer(typed), inbox.PageQuery{First: ptr(10), Types: []string{rareType}})
		if err == nil && len(p.Edges) != rareCount {
			err = fmt.Errorf("the type filter returned %d notifications; want %d", len(p.Edges), rareCount)
		}
		return err
	}},
	{6, "state changes", "Read 3, archive 1, snooze 1, delete 1: BatchGetItem (consistent) of META and the items, then TransactWriteItems of the items, their groups and META, each conditional on its `rev`; the answer's badge is read back (GetItem META).", func(ctx context.Context, e *env) error {
		v := viewer(reader)
		n := len(e.sent)
		if _, err := e.st.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpRead, IDs: e.sent[n-3:]}); err != nil {
			return err
		}
		if _, err := e.st.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpArchive, IDs: e.sent[n-4 : n-3]}); err != nil {
			return err
		}
		if _, err := e.st.ApplyState(ctx, v, inbox.StateChange{Op: inbox.OpSnooze, IDs: e.sent[n-5 : n-4], Until: start.Add(time.Hour)}); err != nil {
			return err
		}
		_, err := e.st.Delete(ctx, v, e.sent[n-6:n-5])
		return err
	}},
	{7, "mark all read / seen", "markAllRead and markAllSeen: GetItem + one UpdateItem of META each; then the background sweep's Query of GSI1 and one UpdateItem per stale entry.", func(ctx context.Context, e *env) error {
		v := viewer(reader)
		if _, err := e.st.MarkAll(ctx, v, nil); err != nil {
			return err
		}
		if _, err := e.st.MarkAllSeen(ctx, v); err != nil {
			return err
		}
		_, _, err := e.st.Sweep(ctx, v, "", 100)
		return err
	}},
	{8, "send (2 recipients, templated, email queued)", "The whole send through the send service: accept (recovery task, request), guards, the template, the recipients' one BatchGetItem, one TransactWriteItems per recipient, then the request's completion.", func(ctx context.Context, e *env) error {
		e.emailUsers = []string{user(3), user(4)}
		sent, err := e.svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: "send-0008", Recipients: e.emailUsers,
			Type: "welcome", Category: "account", Template: template, Data: inbox.JSON(`{"name": "Ada"}`),
			Actor: &inbox.Actor{ActorID: "actor0001", Name: "Actor 0001"}, GroupKey: "welcome0"})
		if err != nil {
			return err
		}
		e.emailNotif = sent.Result.NotificationIDs
		if len(e.emailNotif) != len(e.emailUsers) {
			return fmt.Errorf("send wrote %d notifications; want %d", len(e.emailNotif), len(e.emailUsers))
		}
		return nil
	}},
	{9, "actors and targets of a page", "One BatchGetItem of the page's actor and target profiles, deduplicated.", func(ctx context.Context, e *env) error {
		refs := []inbox.ProfileRef{{ID: "actor0000"}, {ID: "actor0001"}, {ID: "actor0002"}, {ID: "actor0001"}, {TargetKind: "post", ID: "post0001"}}
		_, err := e.st.Profiles(ctx, tenant, refs)
		return err
	}},
	{10, "node / nodes", "One BatchGetItem of the notifications and META, one of the profiles.", func(ctx context.Context, e *env) error {
		_, err := e.st.Nodes(ctx, viewer(reader), []inbox.NodeRef{{Notification: e.sent[0]}, {Notification: e.sent[1]},
			{Profile: inbox.ProfileRef{ID: "actor0003"}}})
		return err
	}},
	{11, "due tasks of a shard's minute", "One consistent Query of the shard's minute; a done task is a conditional DeleteItem, a retry one TransactWriteItems (Delete + Put one attempt later).", func(ctx context.Context, e *env) error {
		return e.dueTasks(ctx)
	}},
	{12, "scheduler roster", "One UpdateItem of `SCHED#LEASES` / `ROSTER` every lease/3 per instance: renew the membership, save the checkpoints that moved (each on condition that its shard is the writer's), ReturnValues ALL_NEW; taking shards is one conditional UpdateItem, giving one back another, leaving two (a read, then the conditional write); at start one UpdateItem creates the roster's maps and one Query of the partition reads an earlier version's `SHARD#{n}` checkpoints. Run through the scheduler's own calls (sched's RosterCycle): an instance named like a host takes all 16 shards, saves their checkpoints, gives one back and leaves.", func(ctx context.Context, e *env) error {
		return e.roster(ctx)
	}},
	{13, "preferences (read, and at send)", "GetItem PREFS (consistent); at send, the recipients' PREFS, PROFILE and group in one consistent BatchGetItem.", func(ctx context.Context, e *env) error {
		if _, err := e.st.Preferences(ctx, viewer(reader)); err != nil {
			return err
		}
		_, err := e.st.ReadRecipients(ctx, tenant, []string{user(3), user(4), user(5)}, routing.Need{Profile: true, GroupKey: "welcome0"})
		return err
	}},
	{14, "update preferences", "One UpdateItem of PREFS (switches, category switches, muted targets).", func(ctx context.Context, e *env) error {
		_, err := e.st.UpdatePreferences(ctx, viewer(reader), inbox.PreferencesUpdate{
			Channels:    inbox.SwitchChanges{inbox.ChannelEmail: false},
			Categories:  []inbox.CategorySwitches{{Category: "social", Channels: inbox.SwitchChanges{inbox.ChannelInApp: true}}},
			MuteTargets: []inbox.ProfileRef{{TargetKind: "post", ID: "post0002"}}})
		return err
	}},
	{15, "groups", "One Query of GSI1's `…#GROUPS` partition, then one BatchGetItem of META and the profiles: each group item keeps its newest member's display fields (a page rendering other fields of latest reads the newest members too).", func(ctx context.Context, e *env) error {
		_, err := e.st.Groups(ctx, viewer(reader), inbox.GroupQuery{First: ptr(10), Actors: 3, KeptLatest: true})
		return err
	}},
	{16, "put a template (a new version)", "GetItem HEAD (consistent), then one TransactWriteItems: HEAD with the version + 1 and the new version item.", func(ctx context.Context, e *env) error {
		_, err := e.tpl.Put(ctx, tenant, template, inbox.TemplateInput{Locale: "de", Title: "Willkommen {{ name }}",
			Body: "Hallo {{ name }}.", Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: "Willkommen {{ name }}", Text: "Hallo {{ name }}."}}})
		return err
	}},
	{17, "a template at a pinned version for a locale", "GetItem HEAD, then one Query of the locale's versions up to the pinned one, descending, Limit 1.", func(ctx context.Context, e *env) error {
		_, err := e.st.GetTemplate(ctx, tenant, template, "de", 2)
		return err
	}},
	{18, "add / remove segment members", "Members grouped by shard; per shard one TransactWriteItems of the members and the shard's `~COUNT`, the shards written concurrently.", func(ctx context.Context, e *env) error {
		add := make([]string, 8)
		for i := range add {
			add[i] = user(200 + i)
		}
		_, err := e.st.UpdateSegment(ctx, tenant, segment, add, []string{user(100), user(101)})
		return err
	}},
	{19, "segment count and members", "Count: one BatchGetItem of every shard's `~COUNT` (consistent; a listing reads it too); members: one Query per shard, shard after shard.", func(ctx context.Context, e *env) error {
		if _, err := e.st.SegmentCount(ctx, tenant, segment); err != nil {
			return err
		}
		_, err := e.st.GetSegment(ctx, tenant, segment, 100, "")
		return err
	}},
	{20, "start and run a broadcast", "Start: the segment's count, then one TransactWriteItems (the broadcast, its shards, their tasks); each shard's task: its pages (broadcast and shard read, members Query, page fixed, the recipients' send, checkpoint transaction), then the task's delete.", func(ctx context.Context, e *env) error {
		return e.runBroadcast(ctx)
	}},
	{21, "broadcast progress / cancel", "GetItem of the broadcast; cancel: one conditional UpdateItem.", func(ctx context.Context, e *env) error {
		if _, err := e.bc.Get(ctx, tenant, e.broadcast); err != nil {
			return err
		}
		e.rec.Begin(0)
		id, _, err := e.bc.Begin(ctx, tenant, service.BroadcastSpec{IdempotencyKey: "bcast-0002", Segment: segment,
			Send: inbox.SendInput{Type: "digest", Category: "news", Title: "Weekly digest", Body: "What happened this week."}})
		if err != nil {
			return err
		}
		e.rec.Begin(21)
		_, err = e.bc.Cancel(ctx, tenant, id)
		return err
	}},
	{22, "notification status and delivery records", "One consistent Query of the notification's status partition; an email delivery claimed (UpdateItem), sent (UpdateItem) and confirmed by its provider (UpdateItem); another claimed and retried (TransactWriteItems: the record + the next deliver task).", func(ctx context.Context, e *env) error {
		return e.deliveries(ctx)
	}},
	{23, "tenant settings", "PUT: one PutItem; read: GetItem (consistent).", func(ctx context.Context, e *env) error {
		if _, err := e.st.PutTenantSettings(ctx, tenant, inbox.TenantSettings{WebhookURL: "https://hooks.example.com/inbox",
			WebhookSecret: "0123456789abcdef0123456789abcdef"}); err != nil {
			return err
		}
		_, err := e.st.TenantSettings(ctx, tenant)
		return err
	}},
	{24, "user channel profile and push devices", "PUT: one UpdateItem; read: GetItem; register a device: BatchGetItem of PROFILE and the owner item, then one TransactWriteItems; unregister: two GetItems and one TransactWriteItems.", func(ctx context.Context, e *env) error {
		v := viewer(user(5))
		if _, err := e.st.PutUserProfile(ctx, v, inbox.UserProfile{Addresses: map[string]string{"email": user(5) + "@example.org"}, Locale: "de"}); err != nil {
			return err
		}
		if _, err := e.st.UserProfile(ctx, v); err != nil {
			return err
		}
		token := "device-token-0000000000000000000000000000000000000000000000000001"
		if _, err := e.st.RegisterDevice(ctx, v, token, "apns"); err != nil {
			return err
		}
		_, err := e.st.UnregisterDevice(ctx, v, token)
		return err
	}},
	{25, "send request (accept, replay)", "Accept a scheduled send: Put the recovery task, then one conditional PutItem of the request; a replay of pattern 8's send: the template pinned again (GetItem HEAD, a Query per locale), the recovery task Put again and the request's PutItem, refused, which returns the stored answer.", func(ctx context.Context, e *env) error {
		if _, err := e.svc.Accept(ctx, tenant, service.SendRequest{IdempotencyKey: "send-0025", Recipients: []string{user(6)},
			Type: "reminder", Category: "account", Title: "A reminder", Body: "Due tomorrow.", SendAt: start.Add(2 * time.Hour)}); err != nil {
			return err
		}
		// The replay of pattern 8's send: the stored answer, nothing written.
		_, err := e.svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: "send-0008", Recipients: e.emailUsers,
			Type: "welcome", Category: "account", Template: template, Data: inbox.JSON(`{"name": "Ada"}`),
			Actor: &inbox.Actor{ActorID: "actor0001", Name: "Actor 0001"}, GroupKey: "welcome0"})
		return err
	}},
	{26, "throttled send", "Two sends to one user under a throttle of 1 an hour: the first's transaction also adds to the counter (condition: below the limit); the second's is cancelled by the counter's condition, then ONE TransactWriteItems writes its guard and status records, throttled.", func(ctx context.Context, e *env) error {
		for _, key := range []string{"send-0026a", "send-0026b"} {
			if _, err := e.svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: key, Recipients: []string{user(7)},
				Type: "alert", Category: "account", Title: "CPU high", Body: "Above 90% for 5 minutes.",
				Throttle: &inbox.Throttle{Key: "cpu", Limit: 1, Window: time.Hour}}); err != nil {
				return err
			}
		}
		return nil
	}},
	{27, "suppression list", "A hard bounce puts user0008's address on the list (one conditional PutItem; a second bounce writes nothing), an email send to them reads it in the recipients' second BatchGetItem and skips the channel, the admin list is one Query of GSI1, the delete one DeleteItem.", func(ctx context.Context, e *env) error {
		v := viewer(user(8))
		if _, err := e.st.PutUserProfile(ctx, v, inbox.UserProfile{Addresses: map[string]string{"email": user(8) + "@example.org"}}); err != nil {
			return err
		}
		for range 2 {
			if _, err := e.st.AddSuppression(ctx, tenant, inbox.Suppression{Channel: inbox.ChannelEmail, Address: user(8) + "@example.org", Reason: "bounce"}); err != nil {
				return err
			}
		}
		if _, err := e.svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: "send-0027", Recipients: []string{user(8)},
			Type: "welcome", Category: "account", Template: template, Data: inbox.JSON(`{"name": "Ada"}`)}); err != nil {
			return err
		}
		if _, _, err := e.st.Suppressions(ctx, tenant, inbox.ChannelEmail, "", 50); err != nil {
			return err
		}
		_, err := e.st.RemoveSuppression(ctx, tenant, inbox.ChannelEmail, user(8)+"@example.org")
		return err
	}},
	{28, "batched send", "Three comments on one thread to user0009 with a batch of maxItems 3: the first opens it (the pointer's strongly consistent GetItem, then ONE TransactWriteItems: the guard, the pointer, its close task and a `batching` status summary); the second joins (GetItem, then ONE TransactWriteItems: the guard and the pointer's conditional update); the third joins, fills it and closes it at once: the freeze's UpdateItem (returning the batch), then pattern 8's send of ONE notification, whose transaction also marks the pointer closed.", func(ctx context.Context, e *env) error {
		for i, a := range []string{"actor0001", "actor0002", "actor0003"} {
			if _, err := e.svc.Send(ctx, tenant, service.SendRequest{IdempotencyKey: fmt.Sprintf("send-0028%c", 'a'+i), Recipients: []string{user(9)},
				Type: "comment", Category: "issues", Title: "New comments", Actor: &inbox.Actor{ActorID: a, Name: a},
				Payload: inbox.JSON(`{"text":"+1"}`), Batch: &inbox.Batch{Key: "thread-1", Window: time.Hour, MaxItems: 3}}); err != nil {
				return err
			}
		}
		return nil
	}},
	{29, "announcement", "A tenant-wide announcement: ONE Query of the tenant's set (the cap, the sequence), then ONE TransactWriteItems of three writes whatever the tenant's size (the guard, the announcement, the sequence on condition it is the one read); the set read again once per instance (the invalidation). reader's page merges it from the cache (no call beyond AP1's Queries); reader marks it read (META's consistent GetItem, then ONE UpdateItem of the mark on META); the withdrawal is ONE TransactWriteItems of two and the set read again.", func(ctx context.Context, e *env) error {
		a, _, err := e.ann.Create(ctx, tenant, service.CreateRequest{Input: inbox.AnnouncementInput{IdempotencyKey: "announce-0029",
			Type: "maintenance", Category: "account", Title: "Maintenance on Sunday", Body: "The service pauses from 02:00 to 03:00 UTC."}})
		if err != nil {
			return err
		}
		if _, err := e.ann.Announcements(ctx, tenant, false); err != nil {
			return err
		}
		if _, err := e.st.Inbox(ctx, viewer(reader), inbox.PageQuery{First: ptr(10)}); err != nil {
			return err
		}
		if _, err := e.st.ApplyState(ctx, viewer(reader), inbox.StateChange{Op: inbox.OpRead, IDs: []string{inbox.AnnouncementRef + a.ID}}); err != nil {
			return err
		}
		_, err = e.ann.Withdraw(ctx, tenant, a.ID)
		return err
	}},
}
