// Apollo Client: the inbox as a Relay connection, merged page by page by relayStylePagination.
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { relayStylePagination } from '@apollo/client/utilities';
import { headers, url } from './config.js';

const client = new ApolloClient({
  link: new HttpLink({ uri: url, headers }),
  cache: new InMemoryCache({
    typePolicies: {
      // Viewer implements Node: one cached viewer, keyed by its id.
      Viewer: { keyFields: ['id'], fields: { inbox: relayStylePagination(['filter']) } },
      Notification: { keyFields: ['id'] },
    },
  }),
});

const INBOX = gql`
  query Inbox($first: Int!, $after: String) {
    viewer {
      id
      unreadCount
      inbox(first: $first, after: $after) {
        edges { cursor node { id title read createdAt activityCount actor { name } } }
        pageInfo { hasNextPage endCursor }
      }
    }
  }
`;

const inbox = client.watchQuery({ query: INBOX, variables: { first: 2 } });
const show = ({ viewer }) => console.log(JSON.stringify({
  unreadCount: viewer.unreadCount,
  titles: viewer.inbox.edges.map((e) => e.node.title),
  // A batched notification collects several sends: "Ann and 9 others".
  who: viewer.inbox.edges.map(({ node: n }) => n.actor && (n.activityCount > 1
    ? `${n.actor.name} and ${n.activityCount - 1} other${n.activityCount > 2 ? 's' : ''}` : n.actor.name)),
  hasNextPage: viewer.inbox.pageInfo.hasNextPage,
}));

// The first page (2 notifications), then the next one appended to it: relayStylePagination
// merges both pages into one list of edges in the cache, which the query now reads.
const { data } = await inbox.refetch();
show(data);
await inbox.fetchMore({ variables: { after: data.viewer.inbox.pageInfo.endCursor } });
show(client.readQuery({ query: INBOX, variables: { first: 2 } }));
