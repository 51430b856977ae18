// Relay: a refetchable fragment on Viewer with its inbox as a @connection, compiled by
// relay-compiler (node web/quickstart/relay-compile.js) into __generated__/. React reads it with
// usePaginationFragment; this script drives the same artifacts with relay-runtime alone.
import { Environment, Network, RecordSource, Store, fetchQuery, getSelector } from 'relay-runtime';
import InboxQuery from './__generated__/relayInboxQuery.graphql.js';
import InboxFragment from './__generated__/relayInbox_viewer.graphql.js';
import InboxPaginationQuery from './__generated__/relayInboxPaginationQuery.graphql.js';
import { headers, url } from './config.js';

// What relay-compiler reads. babel-plugin-relay replaces each tag with its artifact; without
// Babel, the imports above are those artifacts and this tag is never called.
function graphql() { throw new Error('graphql tags are compiled by relay-compiler'); }
// eslint-disable-next-line no-unused-expressions
() => graphql`
  query relayInboxQuery {
    viewer { ...relayInbox_viewer }
  }
`;
// eslint-disable-next-line no-unused-expressions
() => graphql`
  fragment relayInbox_viewer on Viewer
    @refetchable(queryName: "relayInboxPaginationQuery")
    @argumentDefinitions(count: { type: "Int", defaultValue: 2 }, cursor: { type: "String" }) {
    id
    unreadCount
    inbox(first: $count, after: $cursor) @connection(key: "relayInbox_inbox") {
      edges { node { id title read } }
    }
  }
`;

const environment = new Environment({
  network: Network.create(async (operation, variables) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ query: operation.text, variables }),
    });
    return response.json();
  }),
  store: new Store(new RecordSource()),
});

const { viewer } = await fetchQuery(environment, InboxQuery, {}).toPromise();
const read = () => environment.lookup(getSelector(InboxFragment, viewer)).data;
const show = (v) => console.log(JSON.stringify({
  id: v.id,
  unreadCount: v.unreadCount,
  titles: v.inbox.edges.map((e) => e.node.title),
  hasNextPage: v.inbox.pageInfo.hasNextPage,
}));

const page = read();
show(page); // the first page: 2 notifications
// The next page, as usePaginationFragment's loadNext(2) asks it, and the connection handler
// appends its edges. relay-compiler refetches a fragment on a type named Viewer through
// Query.viewer; on another Node type it would use node(id), which answers the viewer too.
await fetchQuery(environment, InboxPaginationQuery,
  { count: 2, cursor: page.inbox.pageInfo.endCursor }).toPromise();
show(read()); // 4 edges
