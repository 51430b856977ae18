// Runs the graphql-http package's GraphQL-over-HTTP audit suite against the gateway.
//
//   node tests/js/graphql-http-audit.mjs <http url of /graphql> <token>
//
// Prints one JSON line per audit: {"id","name","status":"ok"|"warn"|"error","reason"}.
// The gateway needs a bearer token for every operation, so every request carries it.
import { serverAudits } from 'graphql-http';

const [url, token] = process.argv.slice(2);
if (!url || !token) {
  console.error('usage: node graphql-http-audit.mjs <http://host:port/graphql> <token>');
  process.exit(2);
}
setTimeout(() => {
  console.error('audit: gave up after 60s');
  process.exit(1);
}, 60_000).unref();

const fetchFn = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};

for (const audit of serverAudits({ url, fetchFn })) {
  const result = await audit.fn();
  const line = { id: audit.id, name: audit.name, status: result.status };
  if (result.status !== 'ok') line.reason = result.reason;
  process.stdout.write(JSON.stringify(line) + '\n');
}
