#!/usr/bin/env bash
# Runs go generate and fails if that leaves graph/ (gqlgen) or rest/gen/ (oapi-codegen)
# different from what is committed: generated code must be regenerated and committed, never edited.
set -euo pipefail
cd "$(dirname "$0")/.."

go generate ./...

status=$(git status --porcelain -- graph/ rest/gen/)
if [[ -n $status ]]; then
	echo "check-generate: graph/ or rest/gen/ differs from the committed version after 'go generate ./...':" >&2
	echo "$status" >&2
	git --no-pager diff -- graph/ rest/gen/ >&2 || true
	echo "check-generate: run 'make generate' and commit graph/ and rest/gen/ (do not edit generated files by hand)" >&2
	exit 1
fi
