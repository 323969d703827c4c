# Sourced by the scripts: puts a terraform CLI on PATH. Uses the one on PATH or
# TF_ACC_TERRAFORM_PATH; otherwise builds v1.5.7 once from the Go module proxy (newer versions
# cannot be built that way) into the Go bin directory.
ensure_terraform() {
  if [ -n "${TF_ACC_TERRAFORM_PATH:-}" ] && [ -x "$TF_ACC_TERRAFORM_PATH" ]; then
    PATH="$(dirname "$TF_ACC_TERRAFORM_PATH"):$PATH"
  fi
  if command -v terraform >/dev/null 2>&1; then
    return 0
  fi
  local gobin
  gobin="$(go env GOBIN)"
  [ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
  if [ ! -x "$gobin/terraform" ]; then
    echo "terraform not found: building v1.5.7 from the Go module proxy (once; a few minutes)"
    GOFLAGS=-mod=mod go install github.com/hashicorp/terraform@v1.5.7
  fi
  PATH="$gobin:$PATH"
  export PATH
  command -v terraform >/dev/null 2>&1
}
