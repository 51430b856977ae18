#!/usr/bin/env bash
# Vendors Redoc's standalone bundle (npm package redoc, file bundles/redoc.standalone.js) at
# the pinned version into rest/redoc/, where rest/docs.go embeds it for GET /v1/docs: the
# API reference is served by the gateway itself, with no network. The bundle (about 1 MB) is
# stored gzipped (-9 -n: the same bytes on every run of the same gzip), beside the
# package's LICENSE and the version and integrity it came from.
#
# Usage: scripts/vendor-redoc.sh            # the pinned version
#        REDOC_VERSION=x.y.z scripts/vendor-redoc.sh   # another one (then update the pin)
set -euo pipefail
cd "$(dirname "$0")/.."

version=${REDOC_VERSION:-2.5.4}
dest=rest/redoc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# npm pack fetches the published tarball through the npm client and checks it against the
# registry's integrity.
(cd "$tmp" && npm pack "redoc@$version" --json --silent >pack.json)
tarball=$(cd "$tmp" && node -e 'const p=require("./pack.json")[0]; process.stdout.write(p.filename)')
integrity=$(cd "$tmp" && node -e 'const p=require("./pack.json")[0]; process.stdout.write(p.integrity)')
tar -xzf "$tmp/$tarball" -C "$tmp" package/bundles/redoc.standalone.js package/LICENSE

mkdir -p "$dest"
gzip -9 -n -c "$tmp/package/bundles/redoc.standalone.js" >"$dest/redoc.standalone.js.gz"
cp "$tmp/package/LICENSE" "$dest/LICENSE"
printf 'redoc@%s %s bundles/redoc.standalone.js\n' "$version" "$integrity" >"$dest/VERSION"
echo "vendor-redoc: $dest/redoc.standalone.js.gz from redoc@$version ($(wc -c <"$tmp/package/bundles/redoc.standalone.js") bytes, $(wc -c <"$dest/redoc.standalone.js.gz") gzipped)"
