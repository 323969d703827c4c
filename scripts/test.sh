#!/usr/bin/env bash
# The project's test command, as CI runs it (.ci/run): installs what it needs (Go modules, the
# terraform CLI and goreleaser when absent, the Apache Kafka broker with Maven), checks
# formatting, vet, generated docs and the release configuration, then runs every test in two
# tiers: on kfake clusters and on real Apache Kafka brokers.
# Usage: ./scripts/test.sh [go test flags]
# One tier alone: KAFKAMIRROR_TEST_TIERS=kfake (or =kafka) ./scripts/test.sh
# Other Kafka versions: KAFKAMIRROR_KAFKA_VERSIONS=4.4.0,4.0.0,3.9.1 (newest first: the source side)
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

if [[ ",${KAFKAMIRROR_TEST_TIERS:-kfake,kafka}," == *,kafka,* ]]; then
  step "Apache Kafka brokers for the real-broker tier (Maven Central, cached once per machine)"
  command -v java >/dev/null || { echo "the real-broker tier needs Java 17+ (java not found)"; exit 1; }
  go run ./tools/fetchkafka
fi

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

# kubectl builds the manifests offline (structure only: schema validation needs a cluster).
step "Kubernetes manifests (deploy/kubernetes)"
if command -v kubectl >/dev/null; then
  kubectl kustomize deploy/kubernetes >/dev/null
else
  echo "kubectl not found: skipped"
fi

step "goreleaser check"
gobin="$(go env GOBIN)"; [ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if [ ! -x "$gobin/goreleaser" ]; then
  echo "installing goreleaser v2.17.0 from the Go module proxy (once; several minutes)"
  GOFLAGS=-mod=mod go install github.com/goreleaser/goreleaser/v2@v2.17.0
fi
"$gobin/goreleaser" check

# A count of inputs, not seconds: under load a time limit can expire while the fuzzer is still
# replaying its corpus, which go test reports as a failure.
step "fuzzing the parsers of outside input (2000 new inputs each, one fuzzing process; go test runs their seed corpora too)"
for target in ./internal/recordbatch:FuzzBatches ./internal/mirrorstate:FuzzStateRecord ./worker:FuzzAPIRequest ./worker:FuzzConfig ./internal/membership:FuzzProtocol; do
  go test -run '^$' -fuzz "^${target#*:}\$" -fuzztime 2000x -parallel 1 "${target%:*}"
done

step "go test"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
KAFKAMIRROR_TIER_REPORT="$report" go test -count=1 -timeout 25m "$@" ./...

step "real-broker tier: scenarios by Kafka version"
if [ -s "$report" ]; then sort "$report"; else echo "none ran (KAFKAMIRROR_TEST_TIERS=${KAFKAMIRROR_TEST_TIERS:-})"; fi
