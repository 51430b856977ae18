#!/usr/bin/env bash
# Makes sure Debian's Chromium (/usr/bin/chromium) exists for the inbox UI's browser tests:
# apt-get update, then apt-get install chromium when absent.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: install Debian's chromium (need root with apt-get to do it here)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
