// Where the gateway is and whose inbox to show. A browser app takes the token from its
// sign-in; these examples take both from the environment:
//   INBOX_TOKEN=$(INBOX_DEV=1 go run . token --user octocat) node web/quickstart/apollo.js
export const url = process.env.INBOX_URL ?? 'http://localhost:8080/graphql';
export const token = process.env.INBOX_TOKEN;
export const headers = { Authorization: `Bearer ${token}` };
