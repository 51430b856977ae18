import { LitElement, html, css, nothing } from 'lit';
import { Connected } from './client.js';
import { actorLine, relativeTime, mergePage, prependLive, snoozeUntil } from './format.js';

// The fields one item shows. Batched notifications (activityCount) are added at merge with the batches work.
const FIELDS = `id title body readAt createdAt archived activityCount actor { name } actions { label url }`;

const PAGE = `query InboxPage($first: Int, $after: String, $filter: InboxFilter) {
  viewer { inbox(first: $first, after: $after, filter: $filter) {
    edges { cursor node { ${FIELDS} } } pageInfo { hasNextPage endCursor } } } }`;

const ADDED = `subscription { notificationAdded { ${FIELDS} } }`;

const TABS = [
  ['unread', 'Unread', { unreadOnly: true }],
  ['all', 'All', {}],
  ['archived', 'Archived', { archived: 'ONLY' }],
];

/**
 * <inbox-feed>: the signed-in user's notifications.
 * Attributes: endpoint (default /graphql), token, page-size (default 20, 1..100), locale (BCP 47).
 * Property getToken: an async function returning a bearer token, called again on expiry.
 * Events (bubbling, composed CustomEvents, detail {id}): inbox-item-click (Enter or click on an item),
 * inbox-action (detail {id, label, url}: an item's action was followed).
 * Parts: tabs, tab, list, item, unread-dot, title, body, meta, actions, button, load-more.
 */
export class InboxFeed extends Connected(LitElement) {
  static properties = {
    endpoint: { type: String },
    token: { type: String },
    pageSize: { type: Number, attribute: 'page-size' },
    locale: { type: String },
    getToken: { attribute: false },
    _tab: { state: true },
    _items: { state: true },
    _next: { state: true },
    _error: { state: true },
    _loading: { state: true },
  };

  static styles = css`
    :host { display: block; font: var(--inbox-font, 14px/1.4 system-ui, sans-serif); color: var(--inbox-text, #1f2328);
      background: var(--inbox-bg, #fff); }
    [role=tablist] { display: flex; gap: 4px; border-bottom: 1px solid var(--inbox-border, #d0d7de); padding: 4px; }
    [role=tab] { border: 0; background: none; padding: 6px 10px; cursor: pointer; color: inherit; font: inherit; }
    [role=tab][aria-selected=true] { border-bottom: 2px solid var(--inbox-accent, #0969da); font-weight: 600; }
    ul { list-style: none; margin: 0; padding: 0; }
    li { display: grid; grid-template-columns: 12px 1fr; gap: 8px; padding: 10px; border-bottom: 1px solid var(--inbox-border, #d0d7de); }
    li:focus { outline: 2px solid var(--inbox-accent, #0969da); outline-offset: -2px; }
    .dot { width: 8px; height: 8px; border-radius: 50%; margin-top: 6px; background: var(--inbox-accent, #0969da); }
    .dot.read { background: transparent; }
    .title { font-weight: 600; }
    .meta { color: var(--inbox-muted, #57606a); font-size: .9em; }
    .row { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 6px; }
    button.small { font: inherit; font-size: .85em; padding: 2px 8px; border: 1px solid var(--inbox-border, #d0d7de);
      border-radius: 6px; background: var(--inbox-button-bg, #f6f8fa); color: inherit; cursor: pointer; }
    a { color: var(--inbox-accent, #0969da); }
    .bar { display: flex; justify-content: space-between; padding: 6px 10px; }
    .err { color: var(--inbox-error, #b42318); padding: 10px; }
    .empty { padding: 16px; color: var(--inbox-muted, #57606a); }
  `;

  constructor() {
    super();
    this.endpoint = '/graphql';
    this.pageSize = 20;
    this._tab = 'all';
    this._items = [];
    this._next = null;
    this._error = '';
    this._loading = false;
  }

  _start() {
    if (this._unsub) this._unsub();
    this._load(true);
    const c = this.client;
    if (this._catchUp && this._catchUpFrom) this._catchUpFrom.onReconnect.delete(this._catchUp);
    this._catchUp = () => this._fillGap();
    this._catchUpFrom = c;
    c.onReconnect.add(this._catchUp);
    this._unsub = c.subscribe(ADDED, (d) => {
      const n = d.notificationAdded;
      if (n && this._tab !== 'archived') this._items = prependLive(this._items, n);
    });
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    if (this._unsub) this._unsub();
    if (this._catchUpFrom) this._catchUpFrom.onReconnect.delete(this._catchUp);
    this._unsub = null;
  }

  // _fillGap puts at the top what arrived while the socket was down: the newest page's items
  // not yet listed (notificationAdded does not replay the gap).
  async _fillGap() {
    const tab = TABS.find((t) => t[0] === this._tab);
    try {
      const d = await this.client.query(PAGE, { first: Math.min(100, Math.max(1, Number(this.pageSize) || 20)), after: null, filter: tab[2] });
      const page = d.viewer.inbox.edges.map((e) => e.node);
      let list = this._items;
      for (const n of page.reverse()) list = prependLive(list, n);
      this._items = list;
    } catch (e) {
      this._error = e.message;
    }
  }

  /** reload fetches the first page of the current tab again. */
  reload() {
    return this._load(true);
  }

  async _load(first) {
    const tab = TABS.find((t) => t[0] === this._tab);
    const size = Math.min(100, Math.max(1, Number(this.pageSize) || 20));
    this._loading = true;
    try {
      const d = await this.client.query(PAGE, { first: size, after: first ? null : this._next, filter: tab[2] });
      const c = d.viewer.inbox;
      const page = c.edges.map((e) => e.node);
      this._items = first ? page : mergePage(this._items, page);
      this._next = c.pageInfo.hasNextPage ? c.pageInfo.endCursor : null;
      this._error = '';
    } catch (e) {
      this._error = e.message;
    } finally {
      this._loading = false;
    }
  }

  async _mutate(field, ids, extra = '', vars = {}) {
    const args = extra ? `(ids: $ids, ${extra})` : '(ids: $ids)';
    const decl = extra ? '$ids: [ID!]!, $until: Time!' : '$ids: [ID!]!';
    try {
      await this.client.query(`mutation M(${decl}) { ${field}${args} { unreadCount } }`, { ids, ...vars });
      this._error = '';
    } catch (e) {
      this._error = e.message;
      return false;
    }
    return true;
  }

  async _toggleRead(n) {
    const read = !n.readAt;
    if (!(await this._mutate(read ? 'markRead' : 'markUnread', [n.id]))) return;
    if (this._tab === 'unread' && read) this._items = this._items.filter((m) => m.id !== n.id);
    else this._items = this._items.map((m) => (m.id === n.id ? { ...m, readAt: read ? new Date().toISOString() : null } : m));
  }

  async _remove(field, n, extra, vars) {
    if (await this._mutate(field, [n.id], extra, vars)) this._items = this._items.filter((m) => m.id !== n.id);
  }

  async _markAll() {
    try {
      await this.client.query('mutation { markAllRead { unreadCount } }');
    } catch (e) {
      this._error = e.message;
      return;
    }
    this._load(true);
  }

  _select(tab) {
    if (tab === this._tab) return;
    this._tab = tab;
    this._items = [];
    this._load(true);
  }

  _open(n) {
    this.dispatchEvent(new CustomEvent('inbox-item-click', { detail: { id: n.id }, bubbles: true, composed: true }));
  }

  _keydown(e, i) {
    const items = [...this.renderRoot.querySelectorAll('li[data-id]')];
    let j = -1;
    if (e.key === 'ArrowDown') j = Math.min(items.length - 1, i + 1);
    else if (e.key === 'ArrowUp') j = Math.max(0, i - 1);
    else if (e.key === 'Home') j = 0;
    else if (e.key === 'End') j = items.length - 1;
    else if (e.key === 'Enter' && e.target === e.currentTarget) {
      e.preventDefault();
      this._open(this._items[i]);
      return;
    }
    if (j >= 0) {
      e.preventDefault();
      items[j].focus();
    }
  }

  _tabKey(e) {
    const i = TABS.findIndex((t) => t[0] === this._tab);
    let j = -1;
    if (e.key === 'ArrowRight') j = (i + 1) % TABS.length;
    else if (e.key === 'ArrowLeft') j = (i + TABS.length - 1) % TABS.length;
    if (j < 0) return;
    e.preventDefault();
    this._select(TABS[j][0]);
    this.updateComplete.then(() => this.renderRoot.querySelector('[role=tab][aria-selected=true]').focus());
  }

  render() {
    const now = Date.now();
    return html`
      <div role="tablist" aria-label="Notifications" part="tabs" @keydown=${this._tabKey}>
        ${TABS.map(([id, label]) => html`<button role="tab" part="tab" id="tab-${id}" aria-selected=${this._tab === id}
          aria-controls="list" tabindex=${this._tab === id ? 0 : -1} @click=${() => this._select(id)}>${label}</button>`)}
      </div>
      <div class="bar"><span></span>
        <button class="small" part="button mark-all" @click=${this._markAll}>Mark all as read</button></div>
      ${this._error ? html`<div class="err" role="alert">${this._error}</div>` : nothing}
      <div id="list" role="tabpanel" aria-labelledby="tab-${this._tab}" aria-busy=${this._loading}><ul part="list">
        ${this._items.map((n, i) => this._item(n, i, now))}
      </ul></div>
      ${!this._loading && this._items.length === 0 ? html`<div class="empty">Nothing here.</div>` : nothing}
      ${this._next ? html`<div class="bar"><button class="small" part="button load-more"
        @click=${() => this._load(false)} ?disabled=${this._loading}>Load more</button></div>` : nothing}`;
  }

  _item(n, i, now) {
    const actor = actorLine(n.actor && n.actor.name, n.activityCount);
    return html`<li data-id=${n.id} part="item" tabindex=${i === 0 ? 0 : -1} aria-label=${`${n.readAt ? '' : 'Unread: '}${n.title || ''}`}
        @keydown=${(e) => this._keydown(e, i)} @click=${(e) => e.target === e.currentTarget && this._open(n)}>
      <span class="dot ${n.readAt ? 'read' : ''}" part="unread-dot" aria-hidden="true"></span>
      <div>
        <div class="title" part="title">${n.title}</div>
        ${n.body ? html`<div part="body">${n.body}</div>` : nothing}
        <div class="meta" part="meta">${actor ? html`${actor} · ` : nothing}<time datetime=${n.createdAt}>${relativeTime(n.createdAt, now, this.locale)}</time></div>
        ${n.actions && n.actions.length ? html`<div class="row" part="actions">${n.actions.map((a) => html`<a href=${a.url} target="_blank" rel="noopener"
          @click=${() => this.dispatchEvent(new CustomEvent('inbox-action', { detail: { id: n.id, label: a.label, url: a.url }, bubbles: true, composed: true }))}>${a.label}</a>`)}</div>` : nothing}
        <div class="row">
          <button class="small" part="button" @click=${() => this._toggleRead(n)}>${n.readAt ? 'Mark unread' : 'Mark read'}</button>
          ${this._tab === 'archived'
            ? html`<button class="small" part="button" @click=${() => this._remove('unarchive', n)}>Unarchive</button>`
            : html`<button class="small" part="button" @click=${() => this._remove('archive', n)}>Archive</button>
              <button class="small" part="button" @click=${() => this._remove('snooze', n, 'until: $until', { until: snoozeUntil('hour', new Date()).toISOString() })}>Snooze 1 h</button>
              <button class="small" part="button" @click=${() => this._remove('snooze', n, 'until: $until', { until: snoozeUntil('tomorrow', new Date()).toISOString() })}>Snooze until tomorrow</button>`}
        </div>
      </div>
    </li>`;
  }
}
