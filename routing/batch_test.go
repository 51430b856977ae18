package routing

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/inboxgw/gateway/inbox"
)

func TestCheckBatchBounds(t *testing.T) {
	ok := inbox.Batch{Key: "comments", Window: time.Minute, MaxItems: 100}
	cases := []struct {
		name string
		mod  func(*inbox.Batch)
		bad  bool
	}{
		{"valid", func(*inbox.Batch) {}, false},
		{"window 1s", func(b *inbox.Batch) { b.Window = time.Second }, false},
		{"window 24h", func(b *inbox.Batch) { b.Window = 24 * time.Hour }, false},
		{"window 999ms", func(b *inbox.Batch) { b.Window = 999 * time.Millisecond }, true},
		{"window 24h+1ms", func(b *inbox.Batch) { b.Window = 24*time.Hour + time.Millisecond }, true},
		{"window sub-ms", func(b *inbox.Batch) { b.Window = 2*time.Second + time.Microsecond }, true},
		{"maxItems 2", func(b *inbox.Batch) { b.MaxItems = 2 }, false},
		{"maxItems 1000", func(b *inbox.Batch) { b.MaxItems = 1000 }, false},
		{"maxItems 1", func(b *inbox.Batch) { b.MaxItems = 1 }, true},
		{"maxItems 1001", func(b *inbox.Batch) { b.MaxItems = 1001 }, true},
		{"empty key", func(b *inbox.Batch) { b.Key = "" }, true},
		{"key of 10 KB", func(b *inbox.Batch) { b.Key = strings.Repeat("k", 10<<10) }, true},
		{"key with #", func(b *inbox.Batch) { b.Key = "a#b" }, true},
	}
	for _, c := range cases {
		b := ok
		c.mod(&b)
		err := CheckBatch(b)
		if (err != nil) != c.bad {
			t.Errorf("%s: CheckBatch = %v, want error %v", c.name, err, c.bad)
		}
		if err != nil && inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: code %q", c.name, inbox.ErrorCode(err))
		}
	}
}

func TestParseBatch(t *testing.T) {
	b, err := ParseBatch("", "5m", nil)
	if err != nil || b.Window != 5*time.Minute || b.MaxItems != inbox.DefaultBatchMaxItems || b.Key != "" {
		t.Fatalf("ParseBatch = %+v, %v", b, err)
	}
	n := 7
	if b, _ = ParseBatch("k", "1s", &n); b.MaxItems != 7 || b.Key != "k" {
		t.Fatalf("ParseBatch = %+v", b)
	}
	// Attack: an explicit maxItems of 0 was taken as the default (100), not refused.
	for _, m := range []int{0, -1, 1, 1001} {
		if _, err := ParseBatch("k", "1m", &m); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("maxItems %d: %v, want BAD_USER_INPUT", m, err)
		}
	}
	for _, w := range []string{"", "five minutes", strings.Repeat("1", 40) + "s"} {
		if _, err := ParseBatch("k", w, nil); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("window %q: %v", w, err)
		}
	}
}

func TestNextBatchStep(t *testing.T) {
	cases := []struct {
		s    BatchState
		want BatchStep
	}{
		{BatchState{}, StepOpen},
		{BatchState{Exists: true, State: BatchClosed, Count: 5, MaxItems: 5}, StepOpen},
		{BatchState{Exists: true, State: BatchOpen, Count: 1, MaxItems: 5}, StepJoin},
		{BatchState{Exists: true, State: BatchOpen, Count: 4, MaxItems: 5}, StepJoin},
		{BatchState{Exists: true, State: BatchOpen, Count: 5, MaxItems: 5}, StepCloseFirst},
		{BatchState{Exists: true, State: BatchClosing, Count: 2, MaxItems: 5}, StepCloseFirst},
	}
	for _, c := range cases {
		if got := NextBatchStep(c.s); got != c.want {
			t.Errorf("NextBatchStep(%+v) = %v, want %v", c.s, got, c.want)
		}
	}
	if !KeepsActivity(0) || !KeepsActivity(9) || KeepsActivity(10) {
		t.Error("KeepsActivity keeps the first 10")
	}
}

func TestBatchRefIsShortAndDistinct(t *testing.T) {
	a, b := BatchRef("comment", "post-1"), BatchRef("comment", "post-2")
	if a == b || len(a) != 32 || BatchRef("comment", "post-1") != a {
		t.Fatalf("refs %q %q", a, b)
	}
	// The separator keeps ("ab", "c") and ("a", "bc") apart.
	if BatchRef("ab", "c") == BatchRef("a", "bc") {
		t.Fatal("type and key run together")
	}
}

func TestBatchData(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	acts := []inbox.Activity{{ActorID: "ann", ActorName: "Ann", Data: inbox.JSON(`{"comment":"hi"}`), CreatedAt: at},
		{ActorID: "bob", CreatedAt: at.Add(time.Second)}}
	out, err := BatchData(inbox.JSON(`{"post":"P","total_activities":"forged"}`), acts, 12)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Post       string
		Total      int `json:"total_activities"`
		Activities []struct {
			Actor     struct{ ID, Name string }
			Data      map[string]string
			CreatedAt string
		}
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Post != "P" || m.Total != 12 || len(m.Activities) != 2 || m.Activities[0].Actor.Name != "Ann" ||
		m.Activities[0].Data["comment"] != "hi" || m.Activities[1].Actor.ID != "bob" || m.Activities[0].CreatedAt != "2026-12-04T10:00:00Z" {
		t.Fatalf("BatchData = %s", out)
	}
	// Data that is not an object gives way to the batch's own variables.
	if out, err = BatchData(inbox.JSON(`[1,2]`), nil, 1); err != nil || string(out) != `{"activities":[],"total_activities":1}` {
		t.Fatalf("BatchData(array) = %s, %v", out, err)
	}
}
