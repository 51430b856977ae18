package tmpl

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"strconv"

	"github.com/inboxgw/gateway/inbox"
)

// TestOneRenderIsBoundedAcrossParts: every part of a template ran under a budget of its
// own, so a template of 8 parts each just under RenderTimeout cost 8 × RenderTimeout per
// render (and Pin renders every locale: 50 × that per accept). One render of all parts
// now shares one budget.
func TestOneRenderIsBoundedAcrossParts(t *testing.T) {
	// A virtual clock that moves step at each look: the test never depends on how fast
	// this machine renders at the moment (under -race beside DynamoDB Local a calibration
	// on the wall clock once took a whole RenderTimeout for 1,000 iterations).
	var looks atomic.Int64
	var step atomic.Int64
	t0 := time.Now()
	en := newEngine()
	en.now = func() time.Time { return t0.Add(time.Duration(looks.Add(1) * step.Load())) }
	s := &Service{en: en}
	vars := map[string]any{"s": strings.Repeat("a", 64)}
	const n = MaxIterations / 8
	src := "{% for i in (1.." + itoa(n) + ") %}{% assign u = s | upcase %}{% endfor %}x"
	one, err := en.parse("body", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	// One part alone: count the clock's looks, then make them add up to 0.4 RenderTimeout.
	if _, err := one.render("body", vars); err != nil {
		t.Fatal(err)
	}
	perPart := looks.Swap(0)
	step.Store(int64(RenderTimeout) * 4 / 10 / perPart)
	if out, err := one.render("body", vars); err != nil || out != "x" {
		t.Fatalf("one part within its budget: %q, %v", out, err)
	}
	// Eight such parts in one template: each alone fits, the render does not.
	p, err := s.parse(inbox.TemplateInput{Locale: "en", Title: src, Body: src,
		Parts: map[string]inbox.Content{inbox.ChannelEmail: {Subject: src, HTML: src, Text: src}, inbox.ChannelPush: {Title: src, Body: src}, inbox.ChannelSMS: {Text: src}}})
	if err != nil {
		t.Fatal(err)
	}
	looks.Store(0)
	_, err = p.render(vars, en.clockNow().Add(RenderTimeout))
	if err == nil || !strings.Contains(err.Error(), "render budget exceeded: rendering took longer") {
		t.Fatalf("8 parts of 0.4 RenderTimeout each: %v; want the render's deadline exceeded", err)
	}
	if used := looks.Load(); used > 3*perPart+perPart/2 {
		t.Errorf("the render stopped after %d looks at the clock, %d a part: want it to stop within the third part", used, perPart)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
