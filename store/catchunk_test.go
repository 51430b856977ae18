package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/inboxgw/gateway/inbox"
)

// maxExpressionBytes is DynamoDB's bound on one update or condition expression (4 KB).
const maxExpressionBytes = 4096

// TestCatChunkKeepsMetaExpressionsSmall: the META updates that name catChunk categories
// (a mark-all's step, in both its forms, and a mark of ids in catChunk categories, whose
// condition names each category's watermarks) stay within DynamoDB's 4 KB per expression,
// with every category at the longest name and every counter and watermark present. The
// engine tests (manycategories_test.go) cross catChunk once; this is what keeps a larger
// catChunk from passing them while a real inbox with that many categories would fail.
func TestCatChunkKeepsMetaExpressionsSmall(t *testing.T) {
	v := inbox.Viewer{TenantID: strings.Repeat("t", inbox.MaxIDBytes), UserID: strings.Repeat("u", inbox.MaxIDBytes)}
	wm := "01J00000000000000000000000"
	m := &metaItem{Version: 7, ReadAllBefore: wm, SeenAllBefore: wm, Cats: map[string]*catState{}}
	var cats []string
	for i := range catChunk {
		c := fmt.Sprintf("%s%03d", strings.Repeat("c", MaxCategoryBytes-3), i)
		cats = append(cats, c)
		m.Cats[c] = &catState{Unread: 1000 + i, Unseen: 1000 + i, ReadWM: wm, SeenWM: wm, HasUnread: true, HasUnseen: true}
	}
	check := func(name string, b *metaUpdate) {
		t.Helper()
		b.clock = wm
		x, err := b.build()
		if err != nil {
			t.Fatal(err)
		}
		update, cond := aws.ToString(x.Update()), aws.ToString(x.Condition())
		if len(update) > maxExpressionBytes || len(cond) > maxExpressionBytes {
			t.Errorf("%s over %d categories: update %d bytes, condition %d bytes (at most %d each)",
				name, catChunk, len(update), len(cond), maxExpressionBytes)
		}
	}
	check("markAll step", markCats(newMetaUpdate(v), m, wm, cats, false))
	check("markAllSeen step", markCats(newMetaUpdate(v), m, wm, cats, true))
	b := newMetaUpdate(v)
	for _, c := range cats {
		b.usesWatermarks(m, c)
		b.addState(c, state{active: true}, state{read: true, seen: true, active: true})
	}
	check("mark of ids", b)
}
