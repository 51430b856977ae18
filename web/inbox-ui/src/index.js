// The inbox gateway's web components. Importing this module defines <inbox-bell>, <inbox-feed>
// and <inbox-preferences> (once; a second import is harmless).
import { InboxFeed } from './feed.js';
import { InboxBell } from './bell.js';
import { InboxPreferences } from './preferences.js';

export { InboxFeed, InboxBell, InboxPreferences };
export { actorLine, relativeTime } from './format.js';

for (const [name, cls] of [['inbox-feed', InboxFeed], ['inbox-bell', InboxBell], ['inbox-preferences', InboxPreferences]]) {
  if (!customElements.get(name)) customElements.define(name, cls);
}
