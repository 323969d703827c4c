// Command kafkamirror-worker mirrors Kafka topics offset for offset (Apache Kafka's KIP-1279
// cluster mirroring, from outside the brokers) and serves the HTTP API the Terraform
// provider drives.
//
// Usage:
//
//	kafkamirror-worker [run] [flags]     run the worker (the default)
//	kafkamirror-worker run --embedded    run it on two in-process clusters (same as demo)
//	kafkamirror-worker demo [flags]      source 127.0.0.1:19092, destination 127.0.0.1:29092
//	kafkamirror-worker describe [--mirror M] [--failed] [--workers] [--json]
//	kafkamirror-worker list [--json]
//	kafkamirror-worker create --mirror M --mirror-config FILE
//	kafkamirror-worker delete --mirror M
//	kafkamirror-worker start|stop|pause|resume --mirror M --topics T,...
//	kafkamirror-worker state bad-records|show|remove [--key KEY] [--force]
//
// Settings come from a YAML file (--config, KAFKAMIRROR_CONFIG), then KAFKAMIRROR_*
// environment variables, then flags; later sources win. `kafkamirror-worker run -h` lists
// them all. The basic ones:
//
//	KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS  --destination-bootstrap-servers  (required)
//	KAFKAMIRROR_API_LISTEN                     --api-listen   (default 127.0.0.1:8080)
//	KAFKAMIRROR_API_TOKEN                      --api-token    (required)
//	KAFKAMIRROR_SECRET_KEY                     --secret-key   (required when a mirror has secrets)
//	KAFKAMIRROR_CONFIG                         --config
//
// In embedded mode (demo or run --embedded) the destination is the embedded one, and
// without an API token the worker generates a random one and prints it on stdout. Once
// __mirror_state is loaded the worker prints one line on stdout:
//
//	kafkamirror-worker ready: api=http://127.0.0.1:8080 [source=...] destination=...
//
// An invalid configuration exits with code 2 and a message naming the setting; SIGTERM or
// SIGINT shuts down gracefully (in-flight requests and produces finish) with code 0.
//
// The commands other than run and demo are clients of a running worker's API, with the
// names of the KIP's kafka-cluster-mirrors.sh: --worker-url (KAFKAMIRROR_WORKER_URL, default
// http://127.0.0.1:8080) and --api-token (KAFKAMIRROR_API_TOKEN).
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

func realMain(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	cmd := "run"
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		// Bare help: the subcommands, then the flags of run, the default one.
		fmt.Fprint(stdout, usage+"\n")
		return runCommand(args[:1], false, stdout, stderr, getenv)
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCommand(args, false, stdout, stderr, getenv)
	case "demo":
		return runCommand(args, true, stdout, stderr, getenv)
	case "describe":
		return describeCommand(args, stdout, stderr, getenv)
	case "list":
		return listCommand(args, stdout, stderr, getenv)
	case "create":
		return createCommand(args, stdout, stderr, getenv)
	case "delete":
		return deleteCommand(args, stdout, stderr, getenv)
	case api.ActionStart, api.ActionStop, api.ActionPause, api.ActionResume:
		return topicCommandCLI(cmd)(args, stdout, stderr, getenv)
	case "state":
		return stateCommand(args, stdout, stderr, getenv)
	case "group":
		return groupCommand(args, stdout, stderr, getenv)
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "kafkamirror-worker: unknown command %q\n\n%s", cmd, usage)
	return 2
}

const usage = `Usage:
  kafkamirror-worker [run] [flags]                      run the worker (default)
  kafkamirror-worker demo [flags]                       run it on two in-process Kafka clusters

Commands for a running worker (the KIP's kafka-cluster-mirrors.sh), through its API:
  kafkamirror-worker list [--json]                      the mirrors
  kafkamirror-worker describe [--mirror M] [--failed] [--workers] [--json]
                                                        partitions: offsets, lag, state, errors
  kafkamirror-worker create --mirror M --mirror-config FILE
                                                        create a mirror (FILE: Kafka client properties)
  kafkamirror-worker delete --mirror M                  delete a mirror whose topics are all stopped
  kafkamirror-worker start --mirror M --topics T,...    start topics, or restart stopped or FAILED ones
  kafkamirror-worker stop --mirror M --topics T,...     fail topics over (--promote: wait for lag 0 first)
  kafkamirror-worker pause --mirror M --topics T,...    stop copying; the topics stay read-only
  kafkamirror-worker resume --mirror M --topics T,...   copy paused topics again
  kafkamirror-worker state bad-records|show|remove      repair __mirror_state records that cannot be read
  kafkamirror-worker group [--json]                     the workers sharing the destination and their work

A change made here to a topic that Terraform manages is undone by the next terraform apply
unless the configuration says the same. Run "kafkamirror-worker <command> -h" for the flags
of a command.
`
