#!/usr/bin/env bash
# Rebuilds web/inbox-ui/dist/inbox.js from its sources (pinned lockfile) and fails when the
# committed bundle differs or when it is over 30 KB gzipped; runs the pure helpers' tests.
set -euo pipefail
cd "$(dirname "$0")/../web/inbox-ui"
[ -d node_modules ] || npm ci --no-audit --no-fund >/dev/null
node --test src/ >/dev/null
cp dist/inbox.js /tmp/inbox-ui-committed.$$.js
npm run --silent build >/dev/null 2>&1
if ! cmp -s dist/inbox.js /tmp/inbox-ui-committed.$$.js; then
  rm -f /tmp/inbox-ui-committed.$$.js
  echo "web/inbox-ui/dist/inbox.js is not what its sources build: run make inbox-ui and commit" >&2
  exit 1
fi
rm -f /tmp/inbox-ui-committed.$$.js
size=$(gzip -9c dist/inbox.js | wc -c)
if [ "$size" -gt 30720 ]; then
  echo "web/inbox-ui/dist/inbox.js is $size bytes gzipped, over the 30 KB limit" >&2
  exit 1
fi
echo "inbox-ui: bundle reproduces, $size bytes gzipped"
