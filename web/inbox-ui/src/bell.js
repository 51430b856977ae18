import { LitElement, html, css, nothing } from 'lit';
import { Connected } from './client.js';

const BADGE = 'subscription { badge { unread } }';

/**
 * <inbox-bell>: a button with the live unread count (the badge subscription over graphql-ws,
 * reconnecting after a dropped socket), announced through an aria-live region; a click opens a
 * popover holding <inbox-feed> with the same endpoint, token/getToken, page-size and locale.
 * Escape closes the popover and returns focus to the bell.
 * Parts: button, badge, popover (plus the feed's parts, exported as feed-*... via the feed element itself).
 */
export class InboxBell extends Connected(LitElement) {
  static properties = {
    endpoint: { type: String },
    token: { type: String },
    pageSize: { type: Number, attribute: 'page-size' },
    locale: { type: String },
    getToken: { attribute: false },
    unread: { type: Number, reflect: true },
    open: { type: Boolean, reflect: true },
  };

  static styles = css`
    :host { display: inline-block; position: relative; font: var(--inbox-font, 14px/1.4 system-ui, sans-serif); }
    button.bell { position: relative; border: 0; background: none; cursor: pointer; padding: 6px; color: var(--inbox-bell-color, currentColor); }
    .badge { position: absolute; top: 0; right: 0; min-width: 16px; padding: 0 4px; border-radius: 8px; font-size: 11px;
      line-height: 16px; background: var(--inbox-accent, #0969da); color: var(--inbox-accent-text, #fff); }
    .popover { position: absolute; right: 0; top: 100%; z-index: 1000; width: var(--inbox-popover-width, 380px);
      max-height: var(--inbox-popover-height, 480px); overflow: auto; background: var(--inbox-bg, #fff);
      border: 1px solid var(--inbox-border, #d0d7de); border-radius: 8px; box-shadow: 0 8px 24px rgba(0,0,0,.15); }
    .sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
  `;

  constructor() {
    super();
    this.endpoint = '/graphql';
    this.pageSize = 20;
    this.unread = 0;
    this.open = false;
  }

  connectedCallback() {
    super.connectedCallback();
    this._onKey = (e) => {
      if (e.key === 'Escape' && this.open) {
        this.open = false;
        this.renderRoot.querySelector('button.bell').focus();
      }
    };
    this.addEventListener('keydown', this._onKey);
  }

  _start() {
    if (this._unsub) this._unsub();
    this._unsub = this.client.subscribe(BADGE, (d) => {
      this.unread = d.badge.unread;
    });
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    if (this._unsub) this._unsub();
    this._unsub = null;
    this.removeEventListener('keydown', this._onKey);
  }

  render() {
    const label = this.unread === 1 ? '1 unread notification' : `${this.unread} unread notifications`;
    return html`
      <button class="bell" part="button" aria-haspopup="dialog" aria-expanded=${this.open} aria-label="Notifications, ${label}"
        @click=${() => { this.open = !this.open; }}>
        <svg width="20" height="20" viewBox="0 0 24 24" aria-hidden="true" fill="currentColor">
          <path d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22zm7-6V11a7 7 0 0 0-5-6.7V3.5a2 2 0 1 0-4 0v.8A7 7 0 0 0 5 11v5l-2 2v1h18v-1z"/></svg>
        ${this.unread > 0 ? html`<span class="badge" part="badge" aria-hidden="true">${this.unread > 99 ? '99+' : this.unread}</span>` : nothing}
      </button>
      <span class="sr" aria-live="polite" role="status">${label}</span>
      ${this.open ? html`<div class="popover" part="popover" role="dialog" aria-label="Notifications">
        <inbox-feed exportparts="tabs,tab,list,item,unread-dot,title,body,meta,actions,button,load-more"
          .endpoint=${this.endpoint} .token=${this.token} .getToken=${this.getToken} .pageSize=${this.pageSize} .locale=${this.locale}></inbox-feed>
      </div>` : nothing}`;
  }
}
