package service

import (
	"context"
	"sync"

	"github.com/inboxgw/gateway/inbox"
)

// renderHook returns the render function (RenderFunc) of template tpl of tenant
// at version with data, for one send (a chunk of a request, or one run of a broadcast's
// shard). It resolves each locale asked for to the stored content that serves it
// (Templates.Resolve, in memory once the template's stored locales are known) and renders
// once per stored content: recipients whose locales resolve alike (en, en-x-aaaa,
// en-x-aaab all to en; de-CH-x-abc to de) share one render of the same data. It keeps at
// most one rendering per stored locale of the template (store.MaxTemplateLocales), never
// one per locale asked for. A failed render is not kept: the next call tries again.
func renderHook(t Templates, tenant, tpl string, version int, data inbox.JSON) RenderFunc {
	type served struct {
		locale  string
		version int
	}
	var mu sync.Mutex
	done := map[served]inbox.Rendered{}
	return func(ctx context.Context, locale string) (inbox.Rendered, error) {
		l, v, err := t.Resolve(ctx, tenant, tpl, version, locale)
		if err != nil {
			return inbox.Rendered{}, err
		}
		k := served{l, v}
		// Held while rendering: a concurrent caller of the same content waits for this
		// render rather than running its own.
		mu.Lock()
		defer mu.Unlock()
		if r, ok := done[k]; ok {
			return r, nil
		}
		// Stored locale l at the pinned version is exactly what Resolve named (l at v), and
		// what Resolve just cached; without a pin (0, the latest), l at v names it.
		at := version
		if at == 0 {
			at = v
		}
		r, err := t.Render(ctx, tenant, tpl, at, l, data)
		if err != nil {
			return inbox.Rendered{}, err
		}
		done[k] = r
		return r, nil
	}
}
