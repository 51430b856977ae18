// A subscription (unreadCount by default) over graphql-transport-ws with the graphql-ws client library.
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';
import { args, counter, fail } from './common.mjs';

const { wsUrl, token, want, query } = args();
let finished = false;
const client = createClient({
  url: wsUrl,
  webSocketImpl: WebSocket,
  connectionParams: { Authorization: `Bearer ${token}` },
  retryAttempts: 0,
  lazy: true,
  on: { closed: (e) => { if (!finished) fail('socket closed', { code: e.code, reason: e.reason }); } },
});
const unsubscribe = client.subscribe(
  { query },
  {
    next: counter(want, async () => {
      finished = true;
      unsubscribe();
      await client.dispose();
      process.exit(0);
    }),
    error: (err) => fail('subscription failed', err),
    complete: () => { if (!finished) fail('subscription completed early', {}); },
  },
);
