#!/usr/bin/env bash
# The main job on the embedded default, step by step: build the provider and the worker, start
# the worker with two in-process Kafka clusters, produce sample data (plain, compressed,
# transactional), `terraform apply` examples/quickstart through dev_overrides (no init), show
# the KIP-style describe table with lag 0, prove the logs identical, show a write to the mirrored
# topic refused (the embedded destination enforces ACLs; the demo user "demo", password
# "demo-secret", may write every topic but a mirrored one), fail over (state = "stopped"), show
# the topic writable, and stop the worker.
#
# Needs Go; builds terraform itself when it is not installed. Works offline once the Go
# modules are downloaded. Ports: QUICKSTART_API_PORT (8080), QUICKSTART_SOURCE_PORT (19092),
# QUICKSTART_DESTINATION_PORT (29092).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# shellcheck source=scripts/lib/terraform.sh
. scripts/lib/terraform.sh

api_port=${QUICKSTART_API_PORT:-8080}
src_port=${QUICKSTART_SOURCE_PORT:-19092}
dst_port=${QUICKSTART_DESTINATION_PORT:-29092}
# The embedded destination's demo user (printed by the worker at start).
dst_auth=(--user demo --password demo-secret)
token=quickstart-token-$RANDOM$RANDOM
work=$(mktemp -d)
worker_pid=""

current="starting"
step() {
  current="$*"
  printf '\n==> %s\n' "$*"
}
cleanup() {
  status=$?
  if [ -n "$worker_pid" ] && kill -0 "$worker_pid" 2>/dev/null; then
    kill -TERM "$worker_pid" 2>/dev/null || true
    wait "$worker_pid" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ]; then
    echo
    echo "quickstart FAILED at step: $current"
    [ -f "$work/worker.log" ] && { echo "--- last worker log lines:"; tail -n 20 "$work/worker.log"; }
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

step "building the provider, the worker and the demo tool"
mkdir -p "$work/bin" "$work/providers"
go build -o "$work/providers/terraform-provider-kafkamirror" .
go build -o "$work/bin/kafkamirror-worker" ./worker
go build -o "$work/bin/demo" ./scripts/demo
echo "built into $work"

step "writing a Terraform CLI configuration with dev_overrides (no terraform init needed)"
cat >"$work/terraformrc" <<EOF
provider_installation {
  dev_overrides {
    "kafkamirror/kafkamirror" = "$work/providers"
  }
  direct {}
}
EOF
export TF_CLI_CONFIG_FILE="$work/terraformrc"
echo "TF_CLI_CONFIG_FILE=$TF_CLI_CONFIG_FILE"

step "finding terraform"
ensure_terraform
terraform version | sed -n 1p

step "starting the worker in embedded mode (source 127.0.0.1:$src_port, destination 127.0.0.1:$dst_port)"
KAFKAMIRROR_API_TOKEN=$token KAFKAMIRROR_SECRET_KEY=quickstart-secret-key-0123456789 \
  "$work/bin/kafkamirror-worker" demo --api-listen "127.0.0.1:$api_port" \
  --source-port "$src_port" --destination-port "$dst_port" --log-format text \
  >"$work/worker.log" 2>&1 &
worker_pid=$!
for _ in $(seq 1 300); do
  grep -q "kafkamirror-worker ready:" "$work/worker.log" && break
  kill -0 "$worker_pid" 2>/dev/null || { cat "$work/worker.log"; exit 1; }
  sleep 0.2
done
grep "kafkamirror-worker ready:" "$work/worker.log"

step "producing sample data to the source: plain, zstd, lz4 and transactional records"
"$work/bin/demo" produce --bootstrap "127.0.0.1:$src_port" --topic orders --partitions 3

step "terraform apply of examples/quickstart: a cluster mirror and the mirror topic \"orders\""
cp -r examples/quickstart "$work/tf"
export TF_VAR_worker_url="http://127.0.0.1:$api_port" TF_VAR_worker_token="$token"
export TF_VAR_source_bootstrap_servers="[\"127.0.0.1:$src_port\"]"
terraform -chdir="$work/tf" apply -auto-approve -input=false -no-color

step "the KIP-style describe table, once the lag is 0"
export KAFKAMIRROR_WORKER_URL="http://127.0.0.1:$api_port" KAFKAMIRROR_API_TOKEN="$token"
for _ in $(seq 1 150); do
  lag=$("$work/bin/kafkamirror-worker" describe --json | tr -d ' \n' | grep -o '"lag":[0-9]*' | cut -d: -f2 | sort -n | tail -n 1)
  [ "${lag:-1}" = 0 ] && break
  sleep 0.2
done
"$work/bin/kafkamirror-worker" describe
[ "${lag:-1}" = 0 ] || { echo "lag did not reach 0"; exit 1; }

step "proving the destination identical to the source, offset for offset"
"$work/bin/demo" compare --source "127.0.0.1:$src_port" --destination "127.0.0.1:$dst_port" "${dst_auth[@]}" --topic orders

step "writing to the mirrored topic on the destination: refused, it is read-only while mirrored"
"$work/bin/demo" write --bootstrap "127.0.0.1:$dst_port" "${dst_auth[@]}" --topic orders --refused

step "failing over: terraform apply with topic_state = \"stopped\""
terraform -chdir="$work/tf" apply -auto-approve -input=false -no-color -var topic_state=stopped
"$work/bin/kafkamirror-worker" describe

step "writing to the failed-over topic on the destination"
"$work/bin/demo" write --bootstrap "127.0.0.1:$dst_port" "${dst_auth[@]}" --topic orders

step "stopping the worker"
kill -TERM "$worker_pid"
wait "$worker_pid"
worker_pid=""
echo "worker stopped cleanly"

printf '\nquickstart finished: mirrored offset for offset, read-only while mirrored, failed over, destination writable.\n'
cd "$root"
