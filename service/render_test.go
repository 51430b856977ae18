package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/inboxgw/gateway/inbox"
)

// fakeTemplates resolves a locale to its language ("de-CH-x-a" → "de"; en, de and fr are
// stored, anything else falls back to en) and counts its renders.
type fakeTemplates struct {
	renders atomic.Int64
	failDe  atomic.Bool
}

func (f *fakeTemplates) Pin(context.Context, string, string, string, inbox.JSON) (int, error) {
	return 1, nil
}

func (f *fakeTemplates) Resolve(_ context.Context, _, _ string, version int, locale string) (string, int, error) {
	if locale == "bad" {
		return "", 0, inbox.Errorf(inbox.CodeBadUserInput, "locale %q is not a known BCP 47 language tag", locale)
	}
	switch l := locale[:min(2, len(locale))]; l {
	case "de", "fr":
		return l, version, nil
	}
	return "en", version, nil
}

func (f *fakeTemplates) Render(_ context.Context, _, _ string, version int, locale string, data inbox.JSON) (Rendered, error) {
	f.renders.Add(1)
	if locale == "de" && f.failDe.Load() {
		return Rendered{}, errors.New("store unavailable")
	}
	return Rendered{Title: fmt.Sprintf("%s@%d %s", locale, version, data)}, nil
}

// TestRenderHookRendersOncePerStoredVersion: a send rendered once per locale its
// recipients asked for, though every locale that resolves to the same stored version
// renders the same. The hook now renders once per stored version, for every mix of tags,
// from one goroutine or many, and does not keep a failure.
func TestRenderHookRendersOncePerStoredVersion(t *testing.T) {
	for _, c := range []struct {
		name    string
		locales func(i int) string
		n       int
		renders int64
	}{
		{"en private use", func(i int) string { return fmt.Sprintf("en-x-%05d", i) }, 40, 1},
		{"de-CH private use", func(i int) string { return fmt.Sprintf("de-CH-x-%05d", i) }, 40, 1},
		{"unknown languages", func(i int) string { return fmt.Sprintf("qaa-x-%05d", i) }, 40, 1},
		{"mixed", func(i int) string { return []string{"en-x-", "de-CH-x-", "fr-CA-x-", "x-", ""}[i%5] + fmt.Sprint(i) }, 400, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, concurrent := range []bool{false, true} {
				f := &fakeTemplates{}
				hook := renderHook(f, "acme", "greet", 7, inbox.JSON(`{}`))
				var wg sync.WaitGroup
				errs := make(chan error, c.n)
				for i := range c.n {
					call := func() {
						loc := c.locales(i)
						want, _, _ := f.Resolve(context.Background(), "", "", 7, loc)
						r, err := hook(context.Background(), loc)
						if err != nil || r.Title != want+"@7 {}" {
							errs <- fmt.Errorf("%q rendered %q, %v; want %s@7", loc, r.Title, err, want)
						}
					}
					if concurrent {
						wg.Go(call)
					} else {
						call()
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				if n := f.renders.Load(); n != c.renders {
					t.Errorf("concurrent %v: %d renders for %d locales; want %d (one per stored version)", concurrent, n, c.n, c.renders)
				}
			}
		})
	}

	f := &fakeTemplates{}
	hook := renderHook(f, "acme", "greet", 1, nil)
	if _, err := hook(context.Background(), "bad"); inbox.ErrorCode(err) != inbox.CodeBadUserInput {
		t.Errorf("a bad locale: %v; want its BAD_USER_INPUT", err)
	}
	f.failDe.Store(true)
	if _, err := hook(context.Background(), "de-x-a"); err == nil {
		t.Fatal("a failed render answered no error")
	}
	f.failDe.Store(false)
	if r, err := hook(context.Background(), "de-x-b"); err != nil || r.Title != "de@1 " {
		t.Errorf("after a failure: %q, %v; want a new render", r.Title, err)
	}
	if n := f.renders.Load(); n != 2 {
		t.Errorf("%d renders; want 2 (the failure is not kept)", n)
	}
}
