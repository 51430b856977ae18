package datamodel

import (
	"fmt"
	"strings"
)

// The stated peak workload (rendered in the note with its reasons).
const (
	peakUsers        = 1_000_000
	peakTenants      = 100
	peakTenantUsers  = 100_000
	peakSends        = 1_000 // send requests a second, deployment-wide
	peakTenantSends  = 50    // of the hottest tenant
	peakRecipients   = 2     // per request, on average
	peakOnline       = 0.10  // of the users, with a client open
	peakPageEvery    = 30    // seconds between a client's page + badge reads
	hotUserIn        = 10    // notifications a second into the hottest inbox
	hotUserClients   = 5     // its open clients, each reading a page and the badge every second
	broadcastMembers = 100_000
	broadcastPerSec  = 1_000 // recipients a second the bulk lane writes
	chunkWrites      = 400   // recipients a second of one chunk: 8 at once, ~20 ms a transaction
	instances        = 3
	schedShards      = 16
	// schedLease is the scheduler's default lease (INBOX_SCHED_LEASE), seconds: each
	// instance's heartbeat, one UpdateItem of the roster, comes every third of it.
	schedLease = 30
	// schedPassesPerSec bounds a shard's passes under load: a pass a wake-up asks for
	// starts at least 100 ms after the previous one began (sched's maxKickGap).
	schedPassesPerSec = 10
	// schedQueriesPerPass is a busy pass's Queries of its minute: the first page (Limit
	// 4), then the rest of the tasks due.
	schedQueriesPerPass = 2
	// schedSafetyPerMin is the safety-net pass's Queries a shard a minute (sched's Poll,
	// one minute): the previous minute closed and the next read ahead (Limit 1); an idle
	// shard makes no other.
	schedSafetyPerMin = 2
	// rosterReplacesPerMin is how often an instance is replaced at the peak (a rolling
	// deploy's step, or a crash and its restart), deployment-wide. rosterReplaceWrites is
	// what one replacement writes to the roster besides heartbeats: the leaving instance's
	// leave (a read, then the write), the others' takes of its shards (one each), its
	// successor's start (the maps created where missing), the shards of a share given
	// back to the successor one at a time, and its takes as they come free (two).
	rosterReplacesPerMin = 1
	rosterReplaceWrites  = 2 + (instances - 1) + 1 + (schedShards+instances-1)/instances + 2
	cacheTTL             = 30 // seconds a tenant's settings stay cached per instance
	partitionRCU         = 3000
	partitionWCU         = 1000
)

// loadRow is what one kind of call puts on one partition key value at the peak: Rate
// calls a second (items a second with PerItem), each costing what the pattern's matching
// calls measured.
type loadRow struct {
	What     string
	Pattern  int
	Op       string
	Contains string // a substring of the normalized keys of the calls meant ("" any)
	Where    string // "" every part of the units; else only the table's or that index's
	PerItem  bool   // the units of one item of the call (the call's units / its items)
	Rate     float64
}

// loadKey is a partition key class and the rows that load its hottest value.
type loadKey struct {
	Key  string
	Why  string
	Rows []loadRow
}

var peakKeys = []loadKey{
	{"`T#{t}#U#{user}` (the hottest inbox)", fmt.Sprintf("%d notifications/s in, %d clients each reading a page and the badge every second, a state change a second", hotUserIn, hotUserClients), []loadRow{
		{"a recipient's send transaction (the whole transaction, other partitions' items included)", 8, "TransactWriteItems", "sk=N~META", "table", false, hotUserIn},
		{"the send's read of PREFS, PROFILE and group (3 items)", 8, "BatchGetItem", "sk=PREFS", "", true, 3 * hotUserIn},
		{"newest page + badge", 1, "Query", "", "", false, hotUserClients},
		{"badge alone", 3, "GetItem", "", "", false, hotUserClients},
		{"a state change's reads", 6, "BatchGetItem", "", "", false, 2},
		{"a state change's transaction", 6, "TransactWriteItems", "", "table", false, 1},
	}},
	{"`T#{t}#THR#{user}` (the hottest inbox's throttle counters)", fmt.Sprintf("every one of its %d notifications/s sent with a throttle", hotUserIn), []loadRow{
		{"the counter's update in the recipient's transaction (its item only)", 26, "TransactWriteItems", "THR#", "table", true, hotUserIn},
	}},
	{"`T#{t}#BATCH#{user}` (the hottest inbox's batch pointers)", fmt.Sprintf("every one of its %d notifications/s sent into one batch", hotUserIn), []loadRow{
		{"a join's read of the pointer", 28, "GetItem", "BATCH#", "", false, hotUserIn},
		{"a join's update of the pointer (its item only)", 28, "TransactWriteItems", "BATCH#", "table", true, hotUserIn},
	}},
	{"`T#{t}#U#{user}#UNREAD` on GSI1 (the same inbox)", "its new notifications' index entries and the clients' unread pages", []loadRow{
		{"a recipient's send transaction, GSI1's share", 8, "TransactWriteItems", "sk=N~META", "GSI1", false, hotUserIn},
		{"unread page", 4, "Query", "", "", false, hotUserClients},
	}},
	{"`T#{t}#IDEM#{key}` (one chunk's guards)", fmt.Sprintf("one send's chunk of at most 100 recipients, %d written a second: at most 100 guards in all, so a burst of a quarter second", chunkWrites), []loadRow{
		{"a guard (one item of a recipient's transaction)", 8, "TransactWriteItems", "sk=N~META", "table", true, chunkWrites},
		{"the guards' Query (once a chunk)", 8, "Query", "#IDEM#", "", false, 1},
	}},
	{"`SCHED#{shard}#{minute}` (one scheduler shard's minute)", fmt.Sprintf("%s recovery tasks/s (one a request) and %s deliver tasks/s (one a recipient) over %d shards, each written and then deleted; a shard's %s deliver tasks/s, due as written, wake it every few ms, so its passes come at their bound, %d a second (100 ms apart), each reading the minute in %d Queries (its first page of 4, then the rest)",
		thousands(peakSends), thousands(peakSends*peakRecipients), schedShards, thousands(float64(peakSends*peakRecipients)/schedShards), schedPassesPerSec, schedQueriesPerPass), []loadRow{
		{"a recovery task's Put (accept)", 25, "PutItem", "SCHED#", "", false, float64(peakSends) / schedShards},
		{"a deliver task's Put (one item of a recipient's transaction)", 8, "TransactWriteItems", "sk=N~META", "table", true, float64(peakSends*peakRecipients) / schedShards},
		{"a recovery task's Delete (one item of the request's completion)", 8, "TransactWriteItems", "sk=REQ", "", true, float64(peakSends) / schedShards},
		{"a deliver task's Delete", 11, "DeleteItem", "", "", false, float64(peakSends*peakRecipients) / schedShards},
		{fmt.Sprintf("a pass's Query (at most %d passes a second, %d Queries each)", schedPassesPerSec, schedQueriesPerPass), 11, "Query", "", "", false, schedPassesPerSec * schedQueriesPerPass},
		{fmt.Sprintf("the safety-net pass's Queries (%d a minute; all an idle shard makes)", schedSafetyPerMin), 11, "Query", "", "", false, schedSafetyPerMin / 60.0},
	}},
	{"`SCHED#LEASES` (the scheduler's roster, one item)", fmt.Sprintf("%d instances, each renewing its membership for all its shards in one heartbeat every Lease/3 (%d s); an instance replaced (a rolling deploy's step, or a crash and a restart: %d a minute assumed) writes it %d more times (a leave, the others' takes, a share of the shards given back one at a time and taken) and Queries its partition once",
		instances, schedLease/3, rosterReplacesPerMin, rosterReplaceWrites), []loadRow{
		{"a heartbeat (UpdateItem, ALL_NEW)", 12, "UpdateItem", "", "", false, float64(instances) / (schedLease / 3)},
		{"a leave, take or give-back", 12, "UpdateItem", "", "", false, float64(rosterReplacesPerMin*rosterReplaceWrites) / 60},
		{"a start's Query of the earlier version's leases", 12, "Query", "", "", false, float64(rosterReplacesPerMin) / 60},
	}},
	{"`T#{t}#BCAST#{broadcast}` (a running broadcast)", fmt.Sprintf("%s members, %s recipients/s: %d pages of 100 a second over its 16 shards", thousands(broadcastMembers), thousands(broadcastPerSec), broadcastPerSec/100), []loadRow{
		{"the broadcast read before each page", 20, "GetItem", "sk=B", "", false, broadcastPerSec / 100},
		{"a shard's page fixed", 20, "UpdateItem", "sk=SH#{nn}", "", false, broadcastPerSec / 100},
		{"a page's checkpoint (shard + broadcast)", 20, "TransactWriteItems", "Update pk=T#{t}#BCAST#{broadcast} sk=B", "", false, broadcastPerSec / 100},
	}},
	{"`T#{t}#SEG#{segment}#S#{nn}` (a segment shard)", "a broadcast reads a shard's pages one after the other: at most about a page a second", []loadRow{
		{"a page of members", 20, "Query", "#SEG#", "", false, 1},
	}},
	{"`T#{t}#TPL#{template}` (the hottest tenant's template)", fmt.Sprintf("every one of the hottest tenant's %d sends/s names it", peakTenantSends), []loadRow{
		{"HEAD", 8, "GetItem", "#TPL#", "", false, peakTenantSends},
		{"the locale's version", 8, "Query", "#TPL#", "", false, peakTenantSends},
	}},
	{"`T#{t}#ACTOR#{actor}` (an actor in every notification of a tenant)", fmt.Sprintf("the hottest tenant's %d sends/s upsert it; %d%% of its %s users online read a page every %d s, each page reading it",
		peakTenantSends, int(peakOnline*100), thousands(peakTenantUsers), peakPageEvery), []loadRow{
		{"the send's upsert", 8, "UpdateItem", "#ACTOR#", "", false, peakTenantSends},
		{"a page's profiles (one item of the BatchGetItem)", 9, "BatchGetItem", "", "", true, peakOnline * peakTenantUsers / peakPageEvery},
	}},
	{"`T#{t}#SETTINGS`", fmt.Sprintf("read through each instance's %d s cache", cacheTTL), []loadRow{
		{"a read", 23, "GetItem", "", "", false, float64(instances) / cacheTTL},
	}},
}

// measured returns the mean units of one call of pattern n matching r (or of one item,
// with PerItem); a transaction's write units are doubled and at least 2 an item (what
// DynamoDB charges; DynamoDB Local reports less, see renderMethod); ok is false when no
// call matched.
func measured(calls []Call, r loadRow) (Units, bool) {
	var sum Units
	n := 0
	for _, c := range calls {
		if c.Pattern != r.Pattern || c.Op != r.Op || c.Err != "" || !strings.Contains(collapse(normalize(c.Key)), r.Contains) {
			continue
		}
		u := c.Total()
		if r.Where != "" {
			u = c.Capacity[r.Where]
		}
		if c.Op == "TransactWriteItems" {
			u.WCU *= 2
			// The floor is the items'; an index's share counts its entries, not them.
			if floor := 2 * float64(c.Items); (r.Where == "" || r.Where == "table") && u.WCU < floor {
				u.WCU = floor
			}
		}
		if r.PerItem && c.Items > 0 {
			u.RCU /= float64(c.Items)
			u.WCU /= float64(c.Items)
		}
		sum.RCU += u.RCU
		sum.WCU += u.WCU
		n++
	}
	if n == 0 {
		return Units{}, false
	}
	return Units{sum.RCU / float64(n), sum.WCU / float64(n)}, true
}

// round2 rounds to two decimals (for the note; the sums use the exact values).
func round2(f float64) string { return fmt.Sprintf("%.2f", f) }

func renderPeak(p printer, calls []Call) {
	p("## Peak workload (stated)\n\n")
	p("- **%s users in %d tenants**, the largest with %s: a B2B product's notification center at the scale\n", thousands(peakUsers), peakTenants, thousands(peakTenantUsers))
	p("  this gateway targets.\n")
	p("- **%s send requests/s** deployment-wide at peak, **%d/s for the hottest tenant**, %d recipients each on\n", thousands(peakSends), peakTenantSends, peakRecipients)
	p("  average, each recipient with one delivery beyond in-app (email or push): every request a recovery task,\n")
	p("  every delivery a deliver task.\n")
	p("- **%d%% of users online**, each client reading a page and the badge every %d s (a refresh or a reconnect;\n", int(peakOnline*100), peakPageEvery)
	p("  live updates come through subscriptions, not reads).\n")
	p("- **The hottest inbox**: %d notifications/s into one user (a CI bot's storm) while %d clients of theirs read a\n", hotUserIn, hotUserClients)
	p("  page and the badge every second and mark one notification a second.\n")
	p("- **A broadcast to %s members** written at %s recipients/s by the bulk lane (pages of 100).\n", thousands(broadcastMembers), thousands(broadcastPerSec))
	p("- %d gateway instances, the default %d scheduler shards and lease (%d s: a roster heartbeat every %d s); a shard's\n", instances, schedShards, schedLease, schedLease/3)
	p("  passes come on wake-ups, at most %d a second, and a safety-net pass reads it once a minute.\n\n", schedPassesPerSec)

	p("## Load per partition key at that peak\n\n")
	p("Calls a second on the hottest value of each partition key, times the units one such call measured above\n")
	p("(a transaction at twice its measured units and at least 2 WCU an item), against DynamoDB's limits of %s RCU and %s WCU a second per partition.\n", thousands(partitionRCU), thousands(partitionWCU))
	p("A transaction's units are the whole transaction's unless the row says one item: an upper bound for the\n")
	p("partition named.\n\n")
	p("| partition key | call | calls/s | RCU per call | WCU per call | RCU/s | WCU/s |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	type total struct {
		key string
		why string
		u   Units
	}
	var totals []total
	for _, k := range peakKeys {
		var t Units
		for _, r := range k.Rows {
			u, ok := measured(calls, r)
			if !ok {
				p("| %s | %s (pattern %d: no call measured) | %s | | | | |\n", k.Key, r.What, r.Pattern, round2(r.Rate))
				continue
			}
			t.RCU += u.RCU * r.Rate
			t.WCU += u.WCU * r.Rate
			p("| %s | %s (pattern %d) | %s | %s | %s | %s | %s |\n", k.Key, r.What, r.Pattern, round2(r.Rate), round2(u.RCU), round2(u.WCU),
				round2(u.RCU*r.Rate), round2(u.WCU*r.Rate))
		}
		totals = append(totals, total{k.Key, k.Why, t})
	}
	p("\n| partition key | at peak because | RCU/s | of %s | WCU/s | of %s |\n| --- | --- | --- | --- | --- | --- |\n", thousands(partitionRCU), thousands(partitionWCU))
	for _, t := range totals {
		p("| %s | %s | %s | %s%% | %s | %s%% |\n", t.key, t.why, round2(t.u.RCU), round2(100*t.u.RCU/partitionRCU),
			round2(t.u.WCU), round2(100*t.u.WCU/partitionWCU))
	}
	p("\n")
}

func renderInvariants(p printer) {
	p("## Write invariants\n\n")
	for _, s := range []string{
		"A notification is written once per recipient and idempotency key: its guard `T#{t}#IDEM#{key}` / `R#{user}` is Put on `attribute_not_exists` in the recipient's transaction, with the notification, META's counters, its group, its status records and its deliver tasks: all or nothing.",
		"META's `unreadCount` equals the unread notifications at every committed state: every write that adds a notification or a mark raises META's `clock` on condition that it grows; markAllRead puts its watermark above it; every item of a state change is conditional on the `rev` read.",
		"A send request is accepted once: its `REQ` item is Put on `attribute_not_exists` (or expired); a replay reads the stored answer; a key reused with other content is refused.",
		"A template version is immutable (Put on absence); HEAD moves on condition of the version read, so concurrent PUTs get distinct versions.",
		"A segment's `~COUNT` moves in the transaction of the members it counts, each member Put or Deleted on condition, so a repeat never counts twice.",
		"A broadcast's shard advances on condition of the page it started from, in one transaction with the broadcast's counters; a page is sent under a key of its own, so a rerun duplicates nobody.",
		"A delivery is claimed on condition that it is QUEUED and unclaimed; every outcome is written on condition of the claim's attempt; a provider's callback only moves a record forward.",
		"A push token has one owner in a tenant: its owner item moves on condition of the owner read, in the transaction that edits both users' device maps.",
		"A scheduler shard is run by the instance the roster (`SCHED#LEASES` / `ROSTER`) gives it to while that instance's membership lasts: a take is conditional on each shard being free, the taker's, or its holder's membership expired (or not a number, or dated beyond an hour ahead: forged or skewed); checkpoints are saved on condition that the shard is still the writer's and its membership unexpired; an instance that cannot renew stops its workers a sixth of the lease before its membership expires. A task is deleted on condition that it exists, so two workers never both complete it.",
	} {
		p("- %s\n", s)
	}
	p("\n")
}

func renderHotKeys(p printer) {
	p("## Hot-key risks and how each is defused\n\n")
	for _, s := range []string{
		"**A user's inbox** takes every write for that user: one transaction per notification, whatever the send's size, so a broadcast spreads over its recipients' partitions; the hottest inbox's share of a partition's limits is in the table above. A user flooded far beyond it is a product limit (rate-limit the sender), not a key design one.",
		"**Idempotency keys**: a send's guards share `T#{t}#IDEM#{key}`, but a request is cut into chunks of at most 100 recipients with a key each, and a broadcast page's key is `{broadcast}:{nn}:{page}`: no guard partition ever holds more than 100 items. They are written in a burst of a fraction of a second at the rate the table above shows, 200 WCU in all: a partition's burst capacity (up to 5 minutes of unused capacity) covers it.",
		"**Scheduled tasks** of a minute would all share one partition: `SCHED#{shard}#{minute}` spreads them over `INBOX_SCHED_SHARDS` shards (FNV-1a of the task id) and a new partition every minute; the table above puts one shard's minute at the peak's task rate; raise the shards (they may grow, never shrink) before the WCU/s column nears the limit.",
		"**Segments** would put a 100,000-member follower list in one partition: `T#{t}#SEG#{id}#S#{nn}` spreads members over 16 shards (FNV-1a of the user id), counts are per shard, and adds write the shards concurrently.",
		"**Broadcasts** progress per shard (`SH#{nn}`): only the page checkpoints touch the broadcast item, about one per 100 recipients.",
		"**Profiles of a popular actor** are read by every page that shows them: one BatchGetItem item each, deduplicated per page, and an optional per-instance cache (`INBOX_PROFILE_CACHE_SIZE`, `INBOX_PROFILE_CACHE_TTL`); every send also upserts its actor (see Deferred).",
		"**Tenant settings** are read through a per-instance cache (30 s), and at send inside the recipients' BatchGetItem only when not cached.",
		"**The scheduler's roster** is one item every instance writes: one heartbeat per instance every Lease/3 whatever its shard count, takes and give-backs only when the membership changes (the table above: well under one write a second). It grows with the shards and the instances (a key per shard in two maps, one per member), so a write's units grow by one per KB of it: pattern 12 measured a 16-shard roster. A take names at most 16 shards, a heartbeat at most 32 checkpoints, a leave 32 shards a write, so no write's expressions near DynamoDB's 4 KB limit however many shards there are.",
	} {
		p("- %s\n", s)
	}
	p("\n")
}

func renderDeferred(p printer) {
	p("## Deferred\n\n")
	for _, s := range []string{
		"Pattern 5 measures the type filter alone (issue 18's case: 5 of one type among 300 of another). Its category and archived filters are not measured: user B's notifications share one category and none is archived. A rare category would need what the type filter needs.",
		"Every send upserts its actor and target profiles, even unchanged: a hot actor's partition takes the hottest tenant's send rate in writes (the table above); writing only on a change (a hash kept in a cache) is deferred.",
		"Full-text search over notifications: DynamoDB Streams to a search index (the relay reads the stream already).",
		"Archiving old notifications out of the table (TTL removes expired ones; retention is per tenant).",
		"Global tables: every condition above assumes one Region's writes.",
	} {
		p("- %s\n", s)
	}
	p("\n")
}
