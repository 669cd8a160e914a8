#!/usr/bin/env bash
# The test command of README.md (`make test`): formatting, vet, then every
# test with the race detector, inside a private Secret Service session so the
# keychain tests use a real gnome-keyring.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:-} -tags=seccomp"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -race -count=1 -tags 'seccomp egresstest' ./plugins/egress/... # test-only permitted destinations (the egress plugin)
# The parsers of attacker-controlled input, each fuzzed for a few seconds
# beyond its seeds (the hostile cases of test/attack). -fuzz takes one
# package and one target per run. The budget is a number of inputs, not a
# time: a time budget fails the run with "context deadline exceeded" when a
# loaded machine delays a fuzz worker past it, and a count tests the same
# amount on a slow machine as on a fast one (10 targets x 10000 inputs stay
# around a minute).
# Hand-written fast paths are fuzzed against their reference decoders too
# (lock's scanner, the audit line scanner, the JSON string escaper).
for target in \
  ./kernel/bounded:FuzzYAML ./kernel/bounded:FuzzJSONDepth \
  ./kernel/manifest:FuzzParse ./kernel/config:FuzzLoad ./kernel/lockfile:FuzzParseValue \
  ./kernel/audit:FuzzScanCanonical ./kernel/jsonstr:FuzzAppend \
  ./kernel/plan:FuzzCheckInput ./executor/toolio:FuzzMessage ./executor/toolio:FuzzDecodeResponse; do
  go test -run '^$' -fuzz "^${target#*:}\$" -fuzztime "${FUZZTIME:-10000x}" "${target%%:*}"
done
exec test/keyring.sh go test -race -count=1 -timeout 30m ./... "$@"
