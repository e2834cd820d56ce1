# Two commands for a newcomer: `make run` (the gateway; the offline demo against
# the bundled upstream simulator when no CONFIG is given) and `make test`.
# `make run CONFIG=gateway.yaml LISTEN=127.0.0.1:9000 ARGS='-access-log json'`
# passes a config, a listen address and any other flags of `gateway -help`.
GO        ?= go
CONFIG    ?=
LISTEN    ?=
ARGS      ?=
BIN       := bin
VERSION   := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)

.PHONY: build run test test-short fuzz bench bench-full clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/gateway ./cmd/gateway
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/upstream-sim ./cmd/upstream-sim

run: build
	$(BIN)/gateway $(if $(CONFIG),-config $(CONFIG)) $(if $(LISTEN),-listen $(LISTEN)) $(ARGS)

# The whole suite: vet, unit, end-to-end with the official SDKs, crash tests,
# zero-allocation checks (without -race) and the race detector over the
# concurrent packages.
test:
	scripts/jaeger.sh build
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race -short ./proxy/... ./affinity/... ./store/... ./parse/...

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzPeek$$' -fuzztime 60s ./parse/
	$(GO) test -run '^$$' -fuzz '^FuzzSplice$$' -fuzztime 60s ./parse/
	$(GO) test -run '^$$' -fuzz '^FuzzAppendForUpstream$$' -fuzztime 60s ./parse/
	$(GO) test -run '^$$' -fuzz '^FuzzAppendAskingUsage$$' -fuzztime 60s ./parse/
	$(GO) test -run '^$$' -fuzz '^FuzzAppendWithoutUsageNull$$' -fuzztime 60s ./parse/
	$(GO) test -run '^$$' -fuzz '^FuzzScanner$$' -fuzztime 60s ./parse/
	$(GO) test -run '^$$' -fuzz '^FuzzIndexUsageWord$$' -fuzztime 60s ./parse/
	$(GO) test -run '^$$' -fuzz '^FuzzHeadScan$$' -fuzztime 60s ./proxy/clientconn/
	$(GO) test -run '^$$' -fuzz '^FuzzUpstreamHead$$' -fuzztime 60s ./proxy/
	$(GO) test -run '^$$' -fuzz '^FuzzEventHeads$$' -fuzztime 60s ./proxy/upstream/
	$(GO) test -run '^$$' -fuzz '^FuzzAnswerHeadAsFasthttp$$' -fuzztime 60s ./proxy/upstream/

bench: build
	$(GO) run ./bench/cmd/bench -quick

bench-full: build
	$(GO) run ./bench/cmd/bench

clean:
	rm -rf $(BIN)
