#!/usr/bin/env bash
# Ensures Java 17 or newer is on PATH (DynamoDB Local needs it). As root with
# apt-get available it installs openjdk-17-jre-headless; otherwise it explains.
set -euo pipefail

min=17

java_major() {
	local v
	v=$(java -version 2>&1 | awk -F'"' '/version/ { print $2; exit }') || return 1
	[[ -n $v ]] || return 1
	if [[ $v == 1.* ]]; then v=${v#1.}; fi # 1.8.0_292 -> 8
	v=${v%%[!0-9]*}                        # 17.0.15 -> 17, 21-ea -> 21
	[[ -n $v ]] && echo "$v"
}

have_java() {
	local major
	command -v java >/dev/null 2>&1 || return 1
	major=$(java_major) || return 1
	((major >= min))
}

if have_java; then
	exit 0
fi

if command -v java >/dev/null 2>&1; then
	echo "ensure-java: found Java $(java_major || echo '?'), need $min or newer" >&2
else
	echo "ensure-java: java not found, need Java $min or newer" >&2
fi

if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "ensure-java: installing openjdk-17-jre-headless" >&2
	export DEBIAN_FRONTEND=noninteractive
	mkdir -p /usr/share/man/man1 # the JRE's postinst fails without it on slim images
	apt-get update
	apt-get install -y --no-install-recommends openjdk-17-jre-headless ||
		apt-get install -y --no-install-recommends openjdk-21-jre-headless # distributions that dropped 17
	hash -r
	if have_java; then
		exit 0
	fi
	echo "ensure-java: installed a JRE but java $min+ is still not first on PATH" >&2
	exit 1
fi

echo "ensure-java: install it, e.g. 'sudo apt-get install openjdk-17-jre-headless', or put a JDK 17+ on PATH" >&2
exit 1
