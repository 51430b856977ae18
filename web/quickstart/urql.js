// urql with Graphcache: the badge, kept current in the cache by the mutations' answers.
import { Client, fetchExchange, gql } from '@urql/core';
import { cacheExchange } from '@urql/exchange-graphcache';
import { headers, url } from './config.js';

const BADGE = gql`
  query Badge {
    viewer { id unreadCount inbox(first: 1, filter: { unreadOnly: true }) { nodes { id title } } }
  }
`;
const MARK_READ = gql`
  mutation MarkRead($ids: [ID!]!) {
    markRead(ids: $ids) { unreadCount notifications { id read readAt } }
  }
`;

const client = new Client({
  url,
  fetchOptions: () => ({ headers }),
  exchanges: [
    cacheExchange({
      keys: { Viewer: (v) => v.id, Notification: (n) => n.id },
      updates: {
        Mutation: {
          // A mark answers the new badge: write it on the cached viewer.
          markRead(result, _args, cache) {
            const viewer = cache.resolve('Query', 'viewer');
            cache.writeFragment(gql`fragment _ on Viewer { id unreadCount }`,
              { id: cache.resolve(viewer, 'id'), unreadCount: result.markRead.unreadCount });
          },
        },
      },
    }),
    fetchExchange,
  ],
});

const badge = await client.query(BADGE, {}).toPromise();
if (badge.error) throw badge.error;
const { unreadCount, inbox } = badge.data.viewer;
console.log(JSON.stringify({ unreadCount }));
if (inbox.nodes.length > 0) {
  const marked = await client.mutation(MARK_READ, { ids: [inbox.nodes[0].id] }).toPromise();
  if (marked.error) throw marked.error;
  // Read from the cache only: the badge there is the mutation's answer.
  const cached = await client.query(BADGE, {}, { requestPolicy: 'cache-only' }).toPromise();
  console.log(JSON.stringify({ unreadCount: cached.data.viewer.unreadCount, fromCache: true }));
}
