package inbox

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Announcements (DESIGN.md "Announcements (v3)") are tenant-wide notifications stored once
// and read by every user of the tenant (fan-out on read). A user's inbox shows the
// tenant's active announcements merged by time with their own notifications; what the user
// did to one (read, unread, seen, archived, deleted) is kept on their META item as an
// AnnouncementMark, never as a copy, and their watermarks (markAllRead, markAllSeen, per
// category) cover announcements as they cover notifications. So a badge is the user's own
// counters plus a count derived from the tenant's active announcements and the user's
// marks: exact by construction, whatever races, because nothing is counted twice or kept
// as a counter.
//
// The functions here decide; the store stores (store/announcements.go) and the service
// caches a tenant's set per instance (service/announcements.go).

// ErrAnnouncementSeqMoved says a create lost the race for the tenant's announcement
// sequence: read the set again and retry (the service does).
var ErrAnnouncementSeqMoved = errors.New("the tenant's announcement sequence moved")

// KindPersonal and KindAnnouncement are what a Notification is (the NotificationKind enum
// of the schema): a user's own notification, or a tenant's announcement in their inbox.
const (
	KindPersonal     = "PERSONAL"
	KindAnnouncement = "ANNOUNCEMENT"
)

// AnnouncementRef is the prefix of an announcement's key inside a user's inbox: a state
// change's id "@<ULID>" names the announcement <ULID> (its global id's key), a bare ULID a
// notification of the user's own.
const AnnouncementRef = "@"

// MaxActiveAnnouncements is the most announcements a tenant may have active (created, not
// expired, not withdrawn) at once: every inbox read merges them all from memory, and every
// user's META may hold a mark for each.
const MaxActiveAnnouncements = 100

// MaxAnnouncementProfileField is the most bytes of each display field (name, avatar URL,
// URL, title) of an announcement's actor and target.
const MaxAnnouncementProfileField = 2048

// DefaultAnnouncementTTL is how long an announcement stays when no expiresAt is given;
// MaxAnnouncementTTL the furthest expiresAt may lie.
const (
	DefaultAnnouncementTTL = 30 * 24 * time.Hour
	MaxAnnouncementTTL     = 366 * 24 * time.Hour
)

// Announcement is a tenant-wide notification (POST /v1/announcements, sendAnnouncement).
// ID is a ULID of its creation: it sorts among the users' own notifications by time.
type Announcement struct {
	ID       string
	TenantID string
	Type     string
	Category string
	Title    string
	Body     string
	// Payload is the sender's JSON document (the data given), nil when none.
	Payload JSON
	// Actor and Target are kept on the announcement as given (no profile write: the
	// announcement is its one item); nil when none.
	Actor     *Actor
	Target    *Target
	Actions   []Action
	CreatedAt time.Time
	// ExpiresAt is when it leaves every inbox.
	ExpiresAt time.Time
	// WithdrawnAt is set once it was withdrawn (DELETE /v1/announcements/{id}).
	WithdrawnAt *time.Time
}

// Active reports whether a is in the inboxes at now: created, neither expired nor
// withdrawn.
func (a *Announcement) Active(now time.Time) bool {
	return a.WithdrawnAt == nil && now.Before(a.ExpiresAt)
}

// Status is the announcement's status word: "active", "expired" or "withdrawn".
func (a *Announcement) Status(now time.Time) string {
	switch {
	case a.WithdrawnAt != nil:
		return "withdrawn"
	case !now.Before(a.ExpiresAt):
		return "expired"
	}
	return "active"
}

// AnnouncementSet is a tenant's active announcements as of Seq, the tenant's announcement
// sequence (it grows by one with every announcement created or withdrawn), newest first.
type AnnouncementSet struct {
	Seq   int64
	Items []*Announcement
	// ReadAt is when the set was read (zero when not known): an announcement whose id is
	// older than ReadAt by more than a create's lifetime and is not in Items is not active
	// (a write that prunes the marks of inactive announcements relies on it).
	ReadAt time.Time
}

// Active returns the announcements of s still active at now, newest first.
func (s *AnnouncementSet) Active(now time.Time) []*Announcement {
	if s == nil {
		return nil
	}
	out := make([]*Announcement, 0, len(s.Items))
	for _, a := range s.Items {
		if a.Active(now) {
			out = append(out, a)
		}
	}
	return out
}

// Find returns the announcement id of s active at now, nil when none.
func (s *AnnouncementSet) Find(id string, now time.Time) *Announcement {
	if s == nil {
		return nil
	}
	for _, a := range s.Items {
		if a.ID == id && a.Active(now) {
			return a
		}
	}
	return nil
}

// NextExpiry is the earliest expiry of s's active announcements after now (zero when none):
// when the badges of the tenant change without a write.
func (s *AnnouncementSet) NextExpiry(now time.Time) time.Time {
	var t time.Time
	for _, a := range s.Active(now) {
		if t.IsZero() || a.ExpiresAt.Before(t) {
			t = a.ExpiresAt
		}
	}
	return t
}

// AnnouncementMark is what one user did to one announcement, as kept on their META.
// Mark is the last explicit read mark ("R" or "U") and MarkedAt the ULID of when it was
// made: against the user's read watermark, the later of the two wins, as for a
// notification. Times are Unix milliseconds, 0 when unset.
type AnnouncementMark struct {
	Mark       string `json:"m,omitempty"`
	MarkedAt   string `json:"ma,omitempty"`
	ReadAt     int64  `json:"r,omitempty"`
	SeenAt     int64  `json:"s,omitempty"`
	ArchivedAt int64  `json:"a,omitempty"`
	Deleted    bool   `json:"d,omitempty"`
}

// Explicit read marks of AnnouncementMark.Mark.
const (
	MarkRead   = "R"
	MarkUnread = "U"
)

// AnnouncementMarks is one user's state of their tenant's announcements, read from META
// with their badge: the watermarks (ULIDs; "" when never set; Cat* by category) and the
// marks by announcement id.
type AnnouncementMarks struct {
	ReadWM    string                      `json:"r,omitempty"`
	SeenWM    string                      `json:"s,omitempty"`
	CatReadWM map[string]string           `json:"cr,omitempty"`
	CatSeenWM map[string]string           `json:"cs,omitempty"`
	ByID      map[string]AnnouncementMark `json:"m,omitempty"`
}

func (m *AnnouncementMarks) readWM(cat string) string {
	if m == nil {
		return ""
	}
	return max(m.ReadWM, m.CatReadWM[cat])
}

func (m *AnnouncementMarks) seenWM(cat string) string {
	if m == nil {
		return ""
	}
	return max(m.SeenWM, m.CatSeenWM[cat])
}

func (m *AnnouncementMarks) mark(id string) AnnouncementMark {
	if m == nil {
		return AnnouncementMark{}
	}
	return m.ByID[id]
}

// AnnouncementState is one announcement's state for one user.
type AnnouncementState struct {
	Read, Seen, Archived, Deleted bool
	// ReadAt and SeenAt are when it became read or seen (zero when not, or not known).
	ReadAt, SeenAt time.Time
}

// StateOfAnnouncement derives a's state for the user whose marks are m: read when the
// latest of their explicit mark and their read watermark (the global one or a's
// category's) says so; seen when marked seen or read, or at or below a seen watermark
// (seen never goes back); archived and deleted as marked.
func StateOfAnnouncement(a *Announcement, m *AnnouncementMarks) AnnouncementState {
	mk := m.mark(a.ID)
	rwm, swm := m.readWM(a.Category), m.seenWM(a.Category)
	st := AnnouncementState{Archived: mk.ArchivedAt != 0, Deleted: mk.Deleted}
	switch {
	case mk.Mark != "" && mk.MarkedAt > rwm:
		st.Read = mk.Mark == MarkRead
	default:
		st.Read = mk.Mark == MarkRead || (rwm != "" && a.ID <= rwm)
	}
	if st.Read {
		if mk.Mark == MarkRead && mk.ReadAt != 0 {
			st.ReadAt = time.UnixMilli(mk.ReadAt).UTC()
		} else {
			st.ReadAt = ULIDTime(rwm)
		}
	}
	switch {
	case mk.SeenAt != 0:
		st.Seen, st.SeenAt = true, time.UnixMilli(mk.SeenAt).UTC()
	case swm != "" && a.ID <= swm:
		st.Seen, st.SeenAt = true, ULIDTime(swm)
	case st.Read:
		st.Seen, st.SeenAt = true, st.ReadAt
	}
	return st
}

// ComposeBadge returns own (the user's own counters, read from META with their marks in
// own.Marks) with the announcements of set active at now added: each one not deleted,
// not archived, counts in unread while unread and in unseen while unseen, in its category
// too. The result keeps own in Own and set's sequence in AnnouncementSeq, so that a live
// stream can compose it again when the set changes.
func ComposeBadge(own Badge, set *AnnouncementSet, now time.Time) Badge {
	if own.Own != nil {
		own = *own.Own
	}
	b := own
	keep := own
	b.Own = &keep
	b.Categories = slices.Clone(own.Categories)
	if set == nil {
		return b
	}
	b.AnnouncementSeq = set.Seq
	for _, a := range set.Active(now) {
		st := StateOfAnnouncement(a, own.Marks)
		if st.Deleted || st.Archived {
			continue
		}
		du, ds := b2i(!st.Read), b2i(!st.Seen)
		if du == 0 && ds == 0 {
			continue
		}
		b.Unread += du
		b.Unseen += ds
		if a.Category == "" {
			continue
		}
		i := slices.IndexFunc(b.Categories, func(c CategoryCount) bool { return c.Category == a.Category })
		if i < 0 {
			b.Categories = append(b.Categories, CategoryCount{Category: a.Category})
			i = len(b.Categories) - 1
		}
		b.Categories[i].Unread += du
		b.Categories[i].Unseen += ds
	}
	slices.SortFunc(b.Categories, func(x, y CategoryCount) int { return strings.Compare(x.Category, y.Category) })
	return b
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ApplyAnnouncementOp returns cur after op, made at clock (a ULID of now, above every
// watermark of the inbox) and now: OpRead marks it read (and seen), OpUnread unread,
// OpSeen seen, OpArchive and OpUnarchive archive and restore it. changed is false when
// the state the user sees would not change (the op is idempotent). Snoozing an
// announcement is refused (BAD_USER_INPUT): it is archived instead, since a wake-up per
// user would be a write per user.
func ApplyAnnouncementOp(op StateOp, a *Announcement, m *AnnouncementMarks, clock string, now time.Time) (AnnouncementMark, bool, error) {
	cur := m.mark(a.ID)
	before := StateOfAnnouncement(a, m)
	next := cur
	ms := now.UnixMilli()
	switch op {
	case OpRead:
		if before.Read && before.Seen {
			return cur, false, nil
		}
		next.Mark, next.MarkedAt, next.ReadAt = MarkRead, clock, ms
		if next.SeenAt == 0 {
			next.SeenAt = ms
		}
	case OpUnread:
		if !before.Read {
			return cur, false, nil
		}
		next.Mark, next.MarkedAt, next.ReadAt = MarkUnread, clock, 0
		if next.SeenAt == 0 {
			// Read by a watermark, it was seen by it too; unread, it stays seen (as a
			// notification marked unread does).
			next.SeenAt = ms
		}
	case OpSeen:
		if before.Seen {
			return cur, false, nil
		}
		next.SeenAt = ms
	case OpArchive:
		if before.Archived {
			return cur, false, nil
		}
		next.ArchivedAt = ms
	case OpUnarchive:
		if !before.Archived {
			return cur, false, nil
		}
		next.ArchivedAt = 0
	case OpSnooze, OpUnsnooze:
		return cur, false, Errorf(CodeBadUserInput, "announcements cannot be snoozed: archive it instead")
	default:
		return cur, false, Errorf(CodeBadUserInput, "unknown state change")
	}
	return next, true, nil
}

// AnnouncementNotification is a as the user whose marks are m sees it in their inbox:
// a Notification of kind KindAnnouncement.
func AnnouncementNotification(a *Announcement, m *AnnouncementMarks) *Notification {
	st := StateOfAnnouncement(a, m)
	exp := a.ExpiresAt
	n := &Notification{
		ID: a.ID, Kind: KindAnnouncement, Type: a.Type, Category: a.Category, Title: a.Title, Body: a.Body,
		CreatedAt: a.CreatedAt, Payload: a.Payload, Embedded: &Embedded{Actor: a.Actor, Target: a.Target}, Read: st.Read, Seen: st.Seen, Archived: st.Archived, ExpiresAt: &exp,
		Actions: slices.Clone(a.Actions),
	}
	if n.Actions == nil {
		n.Actions = []Action{}
	}
	if a.Actor != nil {
		n.ActorID = a.Actor.ActorID
	}
	if a.Target != nil {
		n.TargetKind, n.TargetID = a.Target.Kind, a.Target.TargetID
	}
	if st.Read && !st.ReadAt.IsZero() {
		t := st.ReadAt
		n.ReadAt = &t
	}
	if st.Seen && !st.SeenAt.IsZero() {
		t := st.SeenAt
		n.SeenAt = &t
	}
	if mk := m.mark(a.ID); mk.ArchivedAt != 0 {
		t := time.UnixMilli(mk.ArchivedAt).UTC()
		n.ArchivedAt = &t
	}
	return n
}

// Ref is the id a state change names n by (inbox.StateChange.IDs, MarkResult.NotFound):
// its ID, or "@" and its ID for an announcement (AnnouncementRef).
func (n *Notification) Ref() string {
	if n.Kind == KindAnnouncement {
		return AnnouncementRef + n.ID
	}
	return n.ID
}

// AnnouncementVisible reports whether a, in the state st, belongs on a page asked by q
// (deleted never; the unread, archived and category filters as for notifications; the
// types filter by a's type).
func AnnouncementVisible(a *Announcement, st AnnouncementState, q PageQuery) bool {
	if st.Deleted || (q.UnreadOnly && st.Read) {
		return false
	}
	switch q.Archived {
	case ArchivedOnly:
		if !st.Archived {
			return false
		}
	case ArchivedInclude:
	default:
		if st.Archived {
			return false
		}
	}
	if len(q.Categories) > 0 && !slices.Contains(q.Categories, a.Category) {
		return false
	}
	if len(q.Types) > 0 && !slices.Contains(q.Types, a.Type) {
		return false
	}
	return true
}

// SplitAnnouncementIDs splits the ids of a state change: those naming announcements
// ("@<ULID>", returned without the prefix) and the others, each in the order given.
func SplitAnnouncementIDs(ids []string) (own, announcements []string) {
	for _, id := range ids {
		if rest, ok := strings.CutPrefix(id, AnnouncementRef); ok {
			announcements = append(announcements, rest)
		} else {
			own = append(own, id)
		}
	}
	return own, announcements
}

// AnnouncementInput is an announcement to create (POST /v1/announcements,
// sendAnnouncement), rendered already when it came with a template.
type AnnouncementInput struct {
	// IdempotencyKey is unique per announcement (1..256 bytes, no control characters).
	IdempotencyKey string
	Type           string
	Category       string
	Title          string
	Body           string
	Payload        JSON
	Actor          *Actor
	Target         *Target
	Actions        []Action
	// ExpiresAt is when it leaves the inboxes; zero: DefaultAnnouncementTTL after now.
	ExpiresAt time.Time
}

// Validate checks in at now: the key, a type, ids, sizes (as a send's, and the actor's and
// target's fields at most MaxAnnouncementProfileField bytes each), actions, and an
// expiry in the future and at most MaxAnnouncementTTL ahead. BAD_USER_INPUT otherwise.
func (in AnnouncementInput) Validate(now time.Time) error {
	s := SendInput{IdempotencyKey: in.IdempotencyKey, Recipients: []string{"-"}, Type: in.Type, Category: in.Category,
		Title: in.Title, Body: in.Body, Payload: in.Payload, Actor: in.Actor, Target: in.Target}
	if err := s.Validate(); err != nil {
		return err
	}
	if in.Title == "" && in.Body == "" {
		return Errorf(CodeBadUserInput, "an announcement needs a title or a body (or a template that renders them)")
	}
	if len(in.Actions) > MaxActions {
		return Errorf(CodeBadUserInput, "at most %d actions", MaxActions)
	}
	// The actor and target are kept on the announcement's one item (at most 400 KB, read
	// by every set load and cached by every instance): their display fields are bounded.
	var prof []string
	if a := in.Actor; a != nil {
		prof = append(prof, a.Name, a.AvatarURL, a.URL)
	}
	if t := in.Target; t != nil {
		prof = append(prof, t.Title, t.URL)
	}
	for _, f := range prof {
		if len(f) > MaxAnnouncementProfileField {
			return Errorf(CodeBadUserInput, "an actor's or target's name, title and URLs must be at most %d bytes each", MaxAnnouncementProfileField)
		}
	}
	if !in.ExpiresAt.IsZero() {
		if !in.ExpiresAt.After(now) {
			return Errorf(CodeBadUserInput, "expiresAt must be in the future")
		}
		if in.ExpiresAt.Sub(now) > MaxAnnouncementTTL {
			return Errorf(CodeBadUserInput, "expiresAt must be at most %d days ahead", int(MaxAnnouncementTTL/(24*time.Hour)))
		}
	}
	return nil
}

// ULIDTime is the time a ULID was made at (zero for "" or a malformed one).
func ULIDTime(id string) time.Time {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return time.Time{}
	}
	return ulid.Time(u.Time()).UTC()
}
