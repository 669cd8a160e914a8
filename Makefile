# agentnode build. See README.md.
GO        ?= go
TAGS      ?= seccomp
BIN       := bin
# Stripped, path-free binaries: plugins are hashed (SHA-256 pin) on every
# launch, so their size is start-up time.
BUILDFLAGS := -trimpath -ldflags '-s -w'

PLUGINS   := $(patsubst plugins/%/,%,$(sort $(dir $(wildcard plugins/*/*/main.go))))
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin

.PHONY: build test proto demo vet clean bench bench-opa

build:
	@mkdir -p $(BIN)
	$(GO) build $(BUILDFLAGS) -tags '$(TAGS)' -o $(BIN)/agentnode ./cmd/agentnode
	# Baked into the sandbox image by `agentnode sandbox build`: static, and
	# without VCS stamps so the image digest depends on the source only.
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -buildvcs=false -o $(BIN)/agentnode-egress-forwarder ./sdk/sandbox/forwarder
	# Plugins other than sandbox backends need no cgo: built static, they
	# start without the dynamic loader and libc (~0.9 ms of every start; trust
	# and guard plugins start for every command). libcontainer needs cgo.
	@for p in $(PLUGINS); do \
	  kind=$${p%%/*}; name=$${p#*/}; cgo=0; [ "$$kind" = sandbox ] && cgo=1; \
	  echo "CGO_ENABLED=$$cgo $(GO) build -o $(BIN)/agentnode-$$kind-$$name ./plugins/$$p"; \
	  CGO_ENABLED=$$cgo $(GO) build $(BUILDFLAGS) -tags '$(TAGS)' -o $(BIN)/agentnode-$$kind-$$name ./plugins/$$p || exit 1; \
	done

# Regenerate sdk/proto from specs/proto (needs protoc; the Go generators are pinned here).
proto:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
	PATH="$(GOBIN_DIR):$$PATH" protoc -I specs/proto \
	  --go_out=. --go_opt=module=github.com/agentnode/agentnode \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/agentnode/agentnode \
	  specs/proto/agentnode/v1/*.proto

test:
	./test/run.sh

vet:
	$(GO) vet -tags '$(TAGS)' ./...

bench:
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench . -benchmem ./...

# Guard's policy engine next to OPA on an equivalent Rego policy. A separate
# module (test/opabench), so the main build never compiles OPA; it fetches
# OPA on first use.
bench-opa:
	cd test/opabench && GOFLAGS=-mod=mod $(GO) test -run 'TestEquivalent' -bench . -benchmem .

demo: build
	./test/demo.sh

clean:
	rm -rf $(BIN)
