// A subscription (unreadCount by default) over the legacy graphql-ws protocol with Apollo's subscriptions-transport-ws.
import WebSocket from 'ws';
import stws from 'subscriptions-transport-ws';
import { args, counter, fail } from './common.mjs';

const { SubscriptionClient } = stws;
const { wsUrl, token, want, query } = args();
let finished = false;
const client = new SubscriptionClient(
  wsUrl,
  {
    reconnect: false,
    connectionParams: { Authorization: `Bearer ${token}` },
    connectionCallback: (err) => { if (err) fail('connection refused', err); },
  },
  WebSocket,
);
client.onDisconnected(() => { if (!finished) fail('disconnected', {}); });
const sub = client.request({ query }).subscribe({
  next: counter(want, () => {
    finished = true;
    sub.unsubscribe();
    client.close();
    process.exit(0);
  }),
  error: (err) => fail('subscription failed', err),
  complete: () => { if (!finished) fail('subscription completed early', {}); },
});
