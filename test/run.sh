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
go test -race -count=1 -tags 'seccomp egresstest' ./kernel/egress/... # test-only permitted destinations (kernel/egress)
exec test/keyring.sh go test -race -count=1 -timeout 30m ./... "$@"
