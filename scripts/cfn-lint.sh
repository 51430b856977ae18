#!/usr/bin/env bash
# Lints deploy/cloudformation.yaml with cfn-lint: an error or a warning fails (cfn-lint
# exits non-zero for either). cfn-lint comes with the machine image; when it is absent,
# this installs the pinned version below from PyPI into a virtualenv of its own in the
# user's cache (never into the system Python, which Debian refuses: PEP 668), once.
set -euo pipefail
cd "$(dirname "$0")/.."

version=1.51.0 # the image's; another version may know other rules
venv=${XDG_CACHE_HOME:-$HOME/.cache}/inbox-gateway/cfn-lint-$version

# `cfn-lint --version`, not `command -v`: a pyenv shim is on PATH even when the active
# Python lacks the package.
if cfn-lint --version >/dev/null 2>&1; then
	lint=cfn-lint
elif [[ -x $venv/bin/cfn-lint ]]; then
	lint=$venv/bin/cfn-lint
else
	if ! command -v python3 >/dev/null 2>&1; then
		echo "cfn-lint: neither cfn-lint nor python3 found; install cfn-lint (pip install cfn-lint==$version)" >&2
		exit 1
	fi
	echo "cfn-lint: not found; installing cfn-lint $version into $venv" >&2
	if ! python3 -m venv "$venv"; then
		rm -rf "$venv"
		# Debian and Ubuntu ship venv apart from python3.
		if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
			export DEBIAN_FRONTEND=noninteractive
			apt-get update
			apt-get install -y --no-install-recommends python3-venv
			python3 -m venv "$venv"
		else
			echo "cfn-lint: python3 cannot create a virtualenv; install python3-venv (sudo apt-get install python3-venv) or cfn-lint itself" >&2
			exit 1
		fi
	fi
	if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "cfn-lint==$version"; then
		rm -rf "$venv"
		echo "cfn-lint: installing cfn-lint $version failed" >&2
		exit 1
	fi
	lint=$venv/bin/cfn-lint
fi

echo "$("$lint" --version) deploy/cloudformation.yaml"
"$lint" -- deploy/cloudformation.yaml
