package inbox_test

import (
	"strings"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"octocat", true},
		{"user@example.com", true},
		{"名前", true},
		{strings.Repeat("a", inbox.MaxIDBytes), true},
		{"", false},
		{strings.Repeat("a", inbox.MaxIDBytes+1), false},
		{"a#b", false},
		{"#", false},
		{"tab\there", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"bad\xffutf8", false},
	} {
		err := inbox.CheckID("id", tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("CheckID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("CheckID(%q) code = %s", tc.id, inbox.ErrorCode(err))
		}
	}
}

func TestPageQueryValidate(t *testing.T) {
	n := func(i int) *int { return &i }
	for name, tc := range map[string]struct {
		q  inbox.PageQuery
		ok bool
	}{
		"empty":          {inbox.PageQuery{}, true},
		"first 0":        {inbox.PageQuery{First: n(0)}, true},
		"first 100":      {inbox.PageQuery{First: n(100)}, true},
		"first 101":      {inbox.PageQuery{First: n(101)}, false},
		"last -1":        {inbox.PageQuery{Last: n(-1)}, false},
		"both":           {inbox.PageQuery{First: n(1), Last: n(1)}, false},
		"first+before":   {inbox.PageQuery{First: n(1), Before: "x"}, false},
		"last+after":     {inbox.PageQuery{Last: n(1), After: "x"}, false},
		"21 types":       {inbox.PageQuery{Types: make([]string, 21)}, false},
		"empty type":     {inbox.PageQuery{Types: []string{""}}, false},
		"types":          {inbox.PageQuery{Types: []string{"a", "b"}}, true},
		"unread + after": {inbox.PageQuery{UnreadOnly: true, After: "c"}, true},
	} {
		if err := tc.q.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", name, err, tc.ok)
		}
	}
}

func TestSendInputValidate(t *testing.T) {
	ok := inbox.SendInput{IdempotencyKey: "k", Recipients: []string{"a"}, Type: "t"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	hundred := make([]string, 100)
	for i := range hundred {
		hundred[i] = "u"
	}
	full := ok
	full.Recipients = hundred
	full.Payload = inbox.JSON(`"` + strings.Repeat("x", inbox.MaxPayloadBytes-2) + `"`)
	if err := full.Validate(); err != nil {
		t.Fatalf("100 recipients and a 16 KiB payload: %v", err)
	}
	for name, mutate := range map[string]func(*inbox.SendInput){
		"no key":          func(s *inbox.SendInput) { s.IdempotencyKey = "" },
		"key with #":      func(s *inbox.SendInput) { s.IdempotencyKey = "a#b" },
		"no recipients":   func(s *inbox.SendInput) { s.Recipients = nil },
		"101 recipients":  func(s *inbox.SendInput) { s.Recipients = append(hundred, "x") },
		"bad recipient":   func(s *inbox.SendInput) { s.Recipients = []string{"x\n"} },
		"no type":         func(s *inbox.SendInput) { s.Type = "" },
		"bad actor":       func(s *inbox.SendInput) { s.Actor = &inbox.Actor{ActorID: "a#"} },
		"empty target":    func(s *inbox.SendInput) { s.Target = &inbox.Target{Kind: "issue"} },
		"bad target kind": func(s *inbox.SendInput) { s.Target = &inbox.Target{Kind: "i#", TargetID: "1"} },
		"big payload":     func(s *inbox.SendInput) { s.Payload = inbox.JSON(strings.Repeat("1", inbox.MaxPayloadBytes+1)) },
	} {
		in := ok
		mutate(&in)
		if err := in.Validate(); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestErrorCodeAndMessage(t *testing.T) {
	if inbox.ErrorCode(nil) != "" {
		t.Error("nil error has a code")
	}
	plain := strings.NewReader("").UnreadByte()
	if inbox.ErrorCode(plain) != inbox.CodeInternal || inbox.ErrorMessage(plain) != "internal server error" {
		t.Errorf("a plain error must be internal with a generic message: %q", inbox.ErrorMessage(plain))
	}
	e := inbox.Errorf(inbox.CodeNotFound, "notification not found")
	if inbox.ErrorCode(e) != inbox.CodeNotFound || inbox.ErrorMessage(e) != "notification not found" {
		t.Error("domain error lost its code or message")
	}
}
