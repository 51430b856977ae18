package tmpl

import (
	"strings"
	"testing"
	"time"

	"strconv"

	"github.com/inboxgw/gateway/store"
)

// TestOneRenderIsBoundedAcrossParts: every part of a template ran under a budget of its
// own, so a template of 8 parts each just under RenderTimeout cost 8 × RenderTimeout per
// render (and Pin renders every locale: 50 × that per accept). One render of all parts
// now shares one budget.
func TestOneRenderIsBoundedAcrossParts(t *testing.T) {
	s := &Service{en: newEngine()}
	vars := map[string]any{"s": strings.Repeat("a", 8<<10)}
	part := func(n int) string {
		return "{% for i in (1.." + itoa(n) + ") %}{% assign u = s | upcase %}{% endfor %}x"
	}
	// Calibrate: n iterations that take about 0.4 × RenderTimeout in one part.
	n := 1000
	for {
		c, err := s.en.parse("body", part(n), false)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := c.render("body", vars); err != nil {
			t.Fatalf("calibration at %d: %v", n, err)
		}
		if d := time.Since(start); d > RenderTimeout/5 || n*2 > MaxIterations {
			n = int(float64(n) * float64(RenderTimeout) * 0.4 / float64(d))
			break
		}
		n *= 2
	}
	n = min(n, MaxIterations/8)
	src := part(n)
	p, err := s.parse(store.TemplateInput{Locale: "en", Title: src, Body: src,
		Email: &store.TemplateEmail{Subject: src, HTML: src, Text: src},
		Push:  &store.TemplatePush{Title: src, Body: src}, SMS: &store.TemplateSMS{Text: src}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.render(vars, time.Now().Add(RenderTimeout))
	d := time.Since(start)
	if err == nil {
		t.Fatalf("8 parts of %d iterations each rendered in %v: one render is not bounded by RenderTimeout (%v)", n, d, RenderTimeout)
	}
	if !strings.Contains(err.Error(), "render budget exceeded") || d > 4*RenderTimeout {
		t.Fatalf("after %v: %v", d, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
