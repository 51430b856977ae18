package store_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/inboxgw/gateway/inbox"
)

// TestSuppressionDetailClippedOnARuneBoundary: a provider's text over the 500 bytes a
// suppression keeps (delivery and providerhook clip theirs at 512) is clipped on a rune
// boundary: the entry is written, and listed with valid UTF-8.
func TestSuppressionDetailClippedOnARuneBoundary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	detail := strings.Repeat("a", 499) + "é" + strings.Repeat("b", 10) // 'é' spans bytes 499 and 500
	if ok, err := f.s.AddSuppression(ctx, f.tenant, inbox.Suppression{Channel: inbox.ChannelEmail, Address: "kim@example.test", Reason: "smtp_5xx", Detail: detail}); err != nil || !ok {
		t.Fatalf("add: %v %v", ok, err)
	}
	list, _, err := f.s.Suppressions(ctx, f.tenant, "", "", 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if d := list[0].Detail; !utf8.ValidString(d) || len(d) > 500 || !strings.HasPrefix(d, strings.Repeat("a", 499)) {
		t.Fatalf("detail of %d bytes, valid UTF-8 %v: %q", len(d), utf8.ValidString(d), d[max(0, len(d)-8):])
	}
}
