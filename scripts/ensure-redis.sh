#!/usr/bin/env bash
# Ensures redis-server is on PATH (the Redis broker's tests start their own
# throwaway servers with it, see live/redistest). As root with apt-get available
# it installs Debian's redis-server package; otherwise it explains. It never
# starts or enables the system service: tests run their own on free ports.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
	exit 0
fi
echo "ensure-redis: redis-server not found" >&2
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "ensure-redis: installing redis-server" >&2
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends redis-server; then
		apt-get update
		apt-get install -y --no-install-recommends redis-server
	fi
	command -v redis-server >/dev/null 2>&1 && exit 0
fi
echo "ensure-redis: install redis-server (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis)," >&2
echo "ensure-redis: or point INBOX_TEST_REDIS_SERVER at a redis-server binary" >&2
exit 1
