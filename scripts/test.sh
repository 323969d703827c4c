#!/usr/bin/env bash
# The project's test command, as CI runs it (.ci/run): installs what it needs (Go modules, the
# terraform CLI and goreleaser when absent), checks formatting, vet, generated docs and the
# release configuration, then runs every test. Usage: ./scripts/test.sh [go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/terraform.sh
. scripts/lib/terraform.sh

step() { printf '\n==> %s\n' "$*"; }

step "downloading Go modules"
go mod download

step "terraform CLI (acceptance and end-to-end tests)"
ensure_terraform
terraform version 2>/dev/null | sed -n 1p

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "goreleaser check"
gobin="$(go env GOBIN)"; [ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if [ ! -x "$gobin/goreleaser" ]; then
  echo "installing goreleaser v2.17.0 from the Go module proxy (once; several minutes)"
  GOFLAGS=-mod=mod go install github.com/goreleaser/goreleaser/v2@v2.17.0
fi
"$gobin/goreleaser" check

step "go test"
go test -count=1 -timeout 15m "$@" ./...
