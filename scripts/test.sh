#!/usr/bin/env bash
# The project's test command: installs what it needs (Go modules; later the terraform CLI),
# checks formatting and vet, then runs every test. Usage: ./scripts/test.sh [go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "downloading Go modules"
go mod download

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "go test"
go test -count=1 -timeout 15m "$@" ./...
