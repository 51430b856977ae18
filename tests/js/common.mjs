// Shared plumbing of the Node client scripts: arguments, output and a hard time limit.
//
// Every script is run as `node tests/js/<script>.mjs <http url of /graphql> <token> [count]`,
// subscribes to `subscription { unreadCount }` with a real client library, prints each value
// as one JSON line ({"unreadCount": N}) and exits 0 after `count` values (default 2).
// Errors go to stderr with exit status 1; the script gives up after 30 seconds.

export function args() {
  const [url, token, count] = process.argv.slice(2);
  if (!url || !token) {
    console.error('usage: node <script>.mjs <http://host:port/graphql> <token> [count]');
    process.exit(2);
  }
  return { url, wsUrl: url.replace(/^http/, 'ws'), token, want: Number(count ?? 2) };
}

export function fail(what, err) {
  const msg = err instanceof Error ? err.stack || err.message : JSON.stringify(err);
  console.error(`${what}: ${msg}`);
  process.exit(1);
}

// counter returns a function that prints one value and calls done after `want` values.
export function counter(want, done) {
  let seen = 0;
  return (result) => {
    if (result.errors && result.errors.length) fail('subscription error', result.errors);
    const n = result.data && result.data.unreadCount;
    if (typeof n !== 'number') fail('unexpected result', result);
    process.stdout.write(JSON.stringify({ unreadCount: n }) + '\n');
    if (++seen >= want) done();
  };
}

const limit = setTimeout(() => fail('timeout', new Error('no result within 30s')), 30_000);
limit.unref();
