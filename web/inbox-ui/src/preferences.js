import { LitElement, html, css, nothing } from 'lit';
import { Connected } from './client.js';

const CHANNELS = ['inApp', 'email', 'push', 'sms', 'slack'];
const LABELS = { inApp: 'In-app', email: 'Email', push: 'Push', sms: 'SMS', slack: 'Slack' };
const SW = CHANNELS.join(' ');
const PREFS = `{ channels { ${SW} } categories { category critical channels { ${SW} } } quietHours { start end } timezone }`;

/**
 * <inbox-preferences>: the viewer's category × channel switches and quiet hours, saved through
 * updatePreferences. Attributes: endpoint, token (or the getToken property). Critical categories
 * are shown disabled (the tenant sets them). Fires inbox-preferences-saved after a save.
 * Parts: table, switch, quiet-hours, button.
 */
export class InboxPreferences extends Connected(LitElement) {
  static properties = {
    endpoint: { type: String },
    token: { type: String },
    getToken: { attribute: false },
    _prefs: { state: true },
    _status: { state: true },
  };

  static styles = css`
    :host { display: block; font: var(--inbox-font, 14px/1.4 system-ui, sans-serif); color: var(--inbox-text, #1f2328); }
    table { border-collapse: collapse; }
    th, td { padding: 4px 8px; text-align: center; border-bottom: 1px solid var(--inbox-border, #d0d7de); }
    th[scope=row] { text-align: left; }
    input[type=checkbox] { accent-color: var(--inbox-accent, #0969da); }
    fieldset { border: 1px solid var(--inbox-border, #d0d7de); margin-top: 10px; }
    button { margin-top: 10px; font: inherit; }
  `;

  constructor() {
    super();
    this.endpoint = '/graphql';
    this._prefs = null;
    this._status = '';
  }

  async _start() {
    try {
      const d = await this.client.query(`{ viewer { preferences ${PREFS} } }`);
      this._prefs = d.viewer.preferences;
    } catch (e) {
      this._status = e.message;
    }
  }

  _rows() {
    const p = this._prefs;
    return [{ category: null, label: 'Default', critical: false, channels: p.channels },
      ...p.categories.map((c) => ({ ...c, label: c.category }))];
  }

  _toggle(row, ch, on) {
    const p = structuredClone(this._prefs);
    if (row.category === null) p.channels[ch] = on;
    else p.categories.find((c) => c.category === row.category).channels[ch] = on;
    this._prefs = p;
  }

  async _save(e) {
    e.preventDefault();
    const f = this.renderRoot.querySelector('form');
    const start = f.elements.start.value;
    const end = f.elements.end.value;
    const strip = ({ __typename, ...c }) => c;
    const input = {
      channels: strip(this._prefs.channels),
      categories: this._prefs.categories.filter((c) => !c.critical).map((c) => ({ category: c.category, channels: strip(c.channels) })),
      quietHours: start && end ? { start, end } : null,
    };
    if (start && end && !this._prefs.timezone) input.timezone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    try {
      const d = await this.client.query(`mutation P($input: PreferencesInput!) { updatePreferences(input: $input) ${PREFS} }`, { input });
      this._prefs = d.updatePreferences;
      this._status = 'Saved';
      this.dispatchEvent(new CustomEvent('inbox-preferences-saved', { bubbles: true, composed: true }));
    } catch (err) {
      this._status = err.message;
    }
  }

  render() {
    if (!this._prefs) return html`<div role="status">${this._status || 'Loading…'}</div>`;
    const q = this._prefs.quietHours;
    return html`<form @submit=${this._save}>
      <table part="table"><caption>Notification channels per category</caption>
        <thead><tr><th scope="col">Category</th>${CHANNELS.map((c) => html`<th scope="col">${LABELS[c]}</th>`)}</tr></thead>
        <tbody>${this._rows().map((r) => html`<tr><th scope="row">${r.label}</th>${CHANNELS.map((c) => html`<td>
          <input type="checkbox" part="switch" role="switch" aria-label="${r.label}: ${LABELS[c]}" .checked=${r.channels[c]}
            ?disabled=${r.critical} @change=${(e) => this._toggle(r, c, e.target.checked)}></td>`)}</tr>`)}</tbody>
      </table>
      <fieldset part="quiet-hours"><legend>Quiet hours${this._prefs.timezone ? ` (${this._prefs.timezone})` : ''}</legend>
        <label>From <input type="time" name="start" .value=${q ? q.start : ''}></label>
        <label>to <input type="time" name="end" .value=${q ? q.end : ''}></label>
      </fieldset>
      <button type="submit" part="button">Save preferences</button>
      <span role="status">${this._status || nothing}</span>
    </form>`;
  }
}
