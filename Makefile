# agentnode build. See README.md.
GO        ?= go
TAGS      ?= seccomp
BIN       := bin
# Stripped, path-free binaries: plugins are hashed (SHA-256 pin) on every
# launch, so their size is start-up time.
BUILDFLAGS := -trimpath -ldflags '-s -w'
# Binaries that need cgo (libseccomp: agentnode's host confinement,
# libcontainer) are linked statically, as runc is: no dynamic loader and no
# shared libc at start (~1 ms of every command, and of every container init,
# which is the libcontainer plugin re-executed). netgo and osusergo keep the
# resolver and user look-ups in Go, so glibc's NSS is never needed.
STATICFLAGS := -trimpath -ldflags '-s -w -extldflags -static' -tags '$(TAGS) netgo osusergo'

PLUGINS   := $(patsubst plugins/%/,%,$(sort $(dir $(wildcard plugins/*/*/main.go))))
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin

.PHONY: build deps deps-demo test proto demo vet clean bench bench-all bench-opa

build:
	@mkdir -p $(BIN)
	$(GO) build $(STATICFLAGS) -o $(BIN)/agentnode ./cmd/agentnode
	# Baked into the sandbox image by `agentnode sandbox build`: static, and
	# without VCS stamps so the image digest depends on the source only. Not
	# a plugin, so not named agentnode-<kind>-<name>.
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -buildvcs=false -o $(BIN)/agentnode-forwarder ./sdk/sandbox/forwarder
	# Plugins other than sandbox backends need no cgo: built without it,
	# they start without the dynamic loader and libc (~0.9 ms of every start;
	# trust and guard plugins start for every command). Sandbox backends
	# (libcontainer needs cgo) are linked statically.
	@for p in $(PLUGINS); do \
	  kind=$${p%%/*}; name=$${p#*/}; \
	  echo "$(GO) build -o $(BIN)/agentnode-$$kind-$$name ./plugins/$$p"; \
	  if [ "$$kind" = sandbox ]; then \
	    $(GO) build $(STATICFLAGS) -o $(BIN)/agentnode-$$kind-$$name ./plugins/$$p || exit 1; \
	  else \
	    CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -tags '$(TAGS)' -o $(BIN)/agentnode-$$kind-$$name ./plugins/$$p || exit 1; \
	  fi; \
	done

# Regenerate sdk/proto from specs/proto (needs protoc; the Go generators are pinned here).
proto:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
	PATH="$(GOBIN_DIR):$$PATH" protoc -I specs/proto \
	  --go_out=. --go_opt=module=github.com/agentnode/agentnode \
	  --go-grpc_out=. --go-grpc_opt=module=github.com/agentnode/agentnode \
	  specs/proto/agentnode/v1/*.proto

# Debian packages (and the pinned npm MCP client) the tests need: installed
# as root, a no-op when present; as a normal user the sudo line is printed.
deps:
	./test/deps.sh test

deps-demo:
	./test/deps.sh demo

test: deps
	./test/run.sh

vet:
	$(GO) vet -tags '$(TAGS)' ./...

# The side-by-side table of the README's performance section: each row
# agentnode's work and the raw tool's same work, measured in one run
# (test/benchtable; as root, with Docker and Podman running for their rows).
bench: deps
	./test/keyring.sh $(GO) run ./test/benchtable

# Every benchmark, raw go test output.
bench-all:
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench . -benchmem ./...

# Guard's policy engine next to OPA on an equivalent Rego policy. A separate
# module (test/opabench), so the main build never compiles OPA; it fetches
# OPA on first use.
bench-opa:
	cd test/opabench && GOFLAGS=-mod=mod $(GO) test -run 'TestEquivalent' -bench . -benchmem .

demo: deps-demo
	$(MAKE) build
	./test/demo.sh

clean:
	rm -rf $(BIN)
