package main

// state: the operator's repair of __mirror_state records that cannot be read (the worker
// keeps what they describe waiting meanwhile), through the API like the other commands.

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

const stateUsage = `Usage:
  kafkamirror-worker state bad-records [--json]        the records that cannot be read, and why
  kafkamirror-worker state show --key KEY              one record, with its stored value
  kafkamirror-worker state remove --key KEY [--force]  remove a record that cannot be read
`

func stateCommand(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, stateUsage)
		return 2
	}
	switch sub, args := args[0], args[1:]; sub {
	case "bad-records":
		c := newClientCLI("state bad-records", "[--json]", stderr)
		asJSON := c.fs.Bool("json", false, "print the records as JSON")
		return c.run(args, getenv, cliTimeout, func(ctx context.Context, cl *api.Client) error {
			recs, err := cl.BadStateRecords(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(stdout, recs)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tSTATE-PARTITION\tOFFSET\tPROBLEM")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", r.Key, r.StatePartition, r.Offset, oneLine(r.Problem))
			}
			return tw.Flush()
		})
	case "show":
		c := newClientCLI("state show", "--key KEY", stderr)
		key := c.keyFlag()
		return c.run(args, getenv, cliTimeout, func(ctx context.Context, cl *api.Client) error {
			rec, err := cl.StateRecord(ctx, *key)
			if err != nil {
				return err
			}
			return printJSON(stdout, rec)
		})
	case "remove":
		c := newClientCLI("state remove", "--key KEY [--force]", stderr)
		key := c.keyFlag()
		force := c.fs.Bool("force", false, "remove a readable partition or lastmirror record too (its partition prepares again)")
		return c.run(args, getenv, cliTimeout, func(ctx context.Context, cl *api.Client) error {
			if err := cl.RemoveStateRecord(ctx, *key, *force); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "removed %s\n", *key)
			return nil
		})
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, stateUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "kafkamirror-worker state: unknown command %q\n\n%s", sub, stateUsage)
		return 2
	}
}

// keyFlag registers the required --key.
func (c *clientCLI) keyFlag() *string {
	k := c.fs.String("key", "", "the record's key, as kafkamirror-worker state bad-records prints it (required)")
	c.require("key", k)
	return k
}
