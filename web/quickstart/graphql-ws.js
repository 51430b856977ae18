// graphql-ws: the live badge over WebSocket (graphql-transport-ws). The token goes in
// connection_init, as browsers cannot set headers on a WebSocket.
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { token, url } from './config.js';

const client = createClient({
  url: url.replace(/^http/, 'ws'),
  connectionParams: { Authorization: `Bearer ${token}` },
  webSocketImpl: WebSocket, // Node 20 has no global WebSocket; in a browser, leave this out
});

// The current badge at once, then every change (a mark, a send, another tab's markAllRead).
// Stops after INBOX_EVENTS values when that is set (the test does), never otherwise.
const want = Number(process.env.INBOX_EVENTS ?? Infinity);
let seen = 0;
const unsubscribe = client.subscribe({ query: 'subscription { unreadCount }' }, {
  next: ({ data, errors }) => {
    if (errors) throw new Error(JSON.stringify(errors));
    console.log(JSON.stringify({ unreadCount: data.unreadCount }));
    if (++seen === want) {
      unsubscribe();
      client.dispose();
    }
  },
  error: (err) => { console.error(err); process.exitCode = 1; },
  complete: () => {},
});
