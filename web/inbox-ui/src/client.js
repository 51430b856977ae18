// The GraphQL client the components share: queries over HTTP POST, subscriptions over graphql-ws.
import { createClient } from 'graphql-ws';
import { tokenExpired } from './format.js';

/**
 * InboxClient talks to the gateway's /graphql for one signed-in user.
 * Errors: query() rejects with an Error whose `code` is the first GraphQL error's extensions.code
 * (or HTTP_<status> when the response is not GraphQL).
 */
export class InboxClient {
  /**
   * @param {string} endpoint the /graphql URL (relative URLs resolve against the page)
   * @param {() => Promise<string>} tokenSource returns a bearer token; called again when the token expires
   */
  constructor(endpoint, tokenSource) {
    this.endpoint = new URL(endpoint || '/graphql', document.baseURI).href;
    this.tokenSource = tokenSource;
    this.token = null;
    this.ws = null;
    /** @type {Set<() => void>} called after the socket reconnects (events during the gap were not delivered) */
    this.onReconnect = new Set();
  }

  async bearer() {
    if (!this.token || tokenExpired(this.token, Date.now())) this.token = await this.tokenSource();
    return this.token;
  }

  /** query runs one operation and resolves with its data. */
  async query(query, variables) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const token = await this.bearer();
      const res = await fetch(this.endpoint, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
        body: JSON.stringify({ query, variables }),
      });
      if (res.status === 401 && attempt === 0) {
        this.token = null;
        continue;
      }
      let body;
      try {
        body = await res.json();
      } catch {
        const e = new Error(`HTTP ${res.status}`);
        e.code = `HTTP_${res.status}`;
        throw e;
      }
      if (body.errors && body.errors.length) {
        const code = body.errors[0].extensions && body.errors[0].extensions.code;
        if (code === 'UNAUTHENTICATED' && attempt === 0) {
          this.token = null;
          continue;
        }
        const e = new Error(body.errors[0].message);
        e.code = code || 'GRAPHQL_ERROR';
        throw e;
      }
      return body.data;
    }
    throw Object.assign(new Error('unauthenticated'), { code: 'UNAUTHENTICATED' });
  }

  /**
   * subscribe runs a subscription; next(data) is called per event. It reconnects after a dropped
   * socket (graphql-ws retries with backoff, forever). Returns a function that unsubscribes.
   */
  subscribe(query, next) {
    if (!this.ws) {
      this.ws = createClient({
        url: this.endpoint.replace(/^http/, 'ws'),
        lazy: true,
        retryAttempts: Infinity,
        shouldRetry: () => true,
        connectionParams: async () => ({ Authorization: `Bearer ${await this.bearer()}` }),
        on: {
          connected: () => {
            if (this.wasConnected) this.onReconnect.forEach((f) => f());
            this.wasConnected = true;
          },
        },
      });
    }
    return this.ws.subscribe({ query }, {
      next: (r) => r.data && next(r.data),
      error: () => {},
      complete: () => {},
    });
  }

  close() {
    if (this.ws) this.ws.dispose();
    this.ws = null;
  }
}

const clients = new Map();

/** clientFor returns the shared client of an endpoint and token source (one socket per page). */
export function clientFor(endpoint, token, getToken) {
  const key = `${endpoint}\u0000${token || ''}\u0000${getToken ? 'fn' : ''}`;
  let c = clients.get(key);
  if (!c || (getToken && c.getToken !== getToken)) {
    c = new InboxClient(endpoint, getToken || (async () => token));
    c.getToken = getToken;
    clients.set(key, c);
  }
  return c;
}

// Connected is what every element shares about its connection: `client` for its endpoint and
// credentials, and `_start()` (the element's own) called once per (endpoint, token,
// getToken) while connected and credentialed. An element upgraded before its page sets
// token or getToken waits for them instead of querying without a token. disconnectedCallback
// forgets the key, so a reconnected element starts again.
export const Connected = (Base) => class extends Base {
  get client() {
    return clientFor(this.endpoint, this.token, this.getToken);
  }

  connectedCallback() {
    super.connectedCallback();
    this._maybeStart();
  }

  willUpdate(changed) {
    super.willUpdate(changed);
    if (changed.has('token') || changed.has('getToken') || changed.has('endpoint')) this._maybeStart();
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    this._key = null;
  }

  _maybeStart() {
    if (!(this.token || this.getToken) || !this.isConnected) return;
    const key = [this.endpoint, this.token, this.getToken];
    if (this._key && key.every((v, i) => v === this._key[i])) return;
    this._key = key;
    this._start();
  }
};
