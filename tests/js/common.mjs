// Shared plumbing of the Node client scripts: arguments, output and a hard time limit.
//
// Every script is run as
// `node tests/js/<script>.mjs <http url of /graphql> <token> [count] [subscription document]`,
// subscribes (by default to `subscription { unreadCount }`) with a real client library,
// prints each result's data as one JSON line (e.g. {"unreadCount": N}) and exits 0 after
// `count` values (default 2; 0: until it is killed). Errors go to stderr with exit status
// 1; the script gives up after 30 seconds (count 0: never).

export function args() {
  const [url, token, count, query] = process.argv.slice(2);
  if (!url || !token) {
    console.error('usage: node <script>.mjs <http://host:port/graphql> <token> [count] [subscription document]');
    process.exit(2);
  }
  const want = Number(count ?? 2);
  if (want === 0) clearTimeout(limit);
  return { url, wsUrl: url.replace(/^http/, 'ws'), token, want, query: query || 'subscription { unreadCount }' };
}

export function fail(what, err) {
  const msg = err instanceof Error ? err.stack || err.message : JSON.stringify(err);
  console.error(`${what}: ${msg}`);
  process.exit(1);
}

// counter returns a function that prints one result's data and calls done after `want`
// values (never when want is 0).
export function counter(want, done) {
  let seen = 0;
  return (result) => {
    if (result.errors && result.errors.length) fail('subscription error', result.errors);
    if (!result.data || typeof result.data !== 'object') fail('unexpected result', result);
    process.stdout.write(JSON.stringify(result.data) + '\n');
    if (++seen === want) done();
  };
}

const limit = setTimeout(() => fail('timeout', new Error('no result within 30s')), 30_000);
limit.unref();
