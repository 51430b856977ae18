// A subscription (unreadCount by default) over Server-Sent Events with the graphql-sse client library (distinct
// connections mode: one POST with Accept: text/event-stream per operation).
import { createClient } from 'graphql-sse';
import { args, counter, fail } from './common.mjs';

const { url, token, want, query } = args();
let finished = false;
const client = createClient({
  url,
  headers: { Authorization: `Bearer ${token}` },
  retryAttempts: 0,
});
const unsubscribe = client.subscribe(
  { query },
  {
    next: counter(want, () => {
      finished = true;
      unsubscribe();
      client.dispose();
      process.exit(0);
    }),
    error: (err) => fail('subscription failed', err),
    complete: () => { if (!finished) fail('subscription completed early', {}); },
  },
);
