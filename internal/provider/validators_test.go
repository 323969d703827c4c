package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// runStringValidator validates v and returns the error summary and detail ("" when valid).
func runStringValidator(t *testing.T, v validator.String, value types.String) string {
	t.Helper()
	resp := &validator.StringResponse{}
	v.ValidateString(context.Background(), validator.StringRequest{Path: path.Root("x"), ConfigValue: value}, resp)
	if !resp.Diagnostics.HasError() {
		return ""
	}
	d := resp.Diagnostics.Errors()[0]
	return d.Summary() + ": " + d.Detail()
}

func TestValidators(t *testing.T) {
	syncInterval := durationValidator{api.SyncIntervalRange}
	tests := []struct {
		name  string
		v     validator.String
		value types.String
		want  string // "" for valid, else a substring of the error
	}{
		{"mirror name ok", mirrorNameValidator(), types.StringValue("eu-to-us"), ""},
		{"mirror name space", mirrorNameValidator(), types.StringValue("eu to us"), `Invalid cluster mirror name: The cluster mirror name "eu to us" contains ' '`},
		{"mirror name suffix", mirrorNameValidator(), types.StringValue("eu.removed"), `must not end in ".removed"`},
		{"mirror name long", mirrorNameValidator(), types.StringValue(strings.Repeat("a", 300)), `"` + strings.Repeat("a", 64) + `..." is 300 characters long`},
		{"mirror name null", mirrorNameValidator(), types.StringNull(), ""},
		{"mirror name unknown", mirrorNameValidator(), types.StringUnknown(), ""},
		{"topic ok", topicNameValidator(), types.StringValue("orders.paused"), ""},
		{"topic bad", topicNameValidator(), types.StringValue("orders#1"), `Invalid topic name: The topic name "orders#1" contains '#'`},
		{"duration ok", syncInterval, types.StringValue("1m30s"), ""},
		{"duration at the floor", syncInterval, types.StringValue("1s"), ""},
		{"duration at the ceiling", syncInterval, types.StringValue("24h"), ""},
		{"duration below the floor", syncInterval, types.StringValue("1ns"), `Invalid duration: "1ns" is out of range: it must be from 1s to 24h`},
		{"duration zero", syncInterval, types.StringValue("0s"), `"0s" is out of range: it must be from 1s to 24h`},
		{"duration negative", syncInterval, types.StringValue("-1m"), "out of range"},
		{"duration above the ceiling", syncInterval, types.StringValue("25h"), `"25h" is out of range: it must be from 1s to 24h`},
		{"duration no unit", syncInterval, types.StringValue("30"), `"30" is not a duration`},
		{"duration unknown", syncInterval, types.StringUnknown(), ""},
		{"host:port ok", hostPortValidator{}, types.StringValue("kafka-1.example.com:9092"), ""},
		{"host:port ipv6", hostPortValidator{}, types.StringValue("[::1]:9092"), ""},
		{"host:port no port", hostPortValidator{}, types.StringValue("kafka-1"), `Invalid broker address: "kafka-1" is not host:port`},
		{"host:port port too large", hostPortValidator{}, types.StringValue("127.0.0.1:99999"), `"127.0.0.1:99999" has port "99999"; a port is a number from 1 to 65535`},
		{"host:port port zero", hostPortValidator{}, types.StringValue("kafka-1:0"), `has port "0"`},
		{"host:port port not a number", hostPortValidator{}, types.StringValue("kafka-1:http"), `has port "http"`},
		{"host:port no host", hostPortValidator{}, types.StringValue(":9092"), `":9092" has no host`},
		{"regex ok", regexValidator{}, types.StringValue(`^app\.`), ""},
		{"regex bad", regexValidator{}, types.StringValue(`app(`), `"app(" is not a regular expression in RE2 syntax`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runStringValidator(t, tc.v, tc.value)
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("unexpected error %q", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Fatalf("error %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

func TestValidatorDescriptions(t *testing.T) {
	ctx := context.Background()
	for _, v := range []validator.String{mirrorNameValidator(), topicNameValidator(), durationValidator{api.SyncIntervalRange}, hostPortValidator{}, regexValidator{}} {
		if v.Description(ctx) == "" || v.MarkdownDescription(ctx) == "" {
			t.Errorf("%T has no description", v)
		}
	}
	if d := (durationValidator{api.SyncIntervalRange}).Description(ctx); !strings.Contains(d, "from 1s to 24h") {
		t.Errorf("the sync interval validator's description %q does not give the range", d)
	}
	if !strings.Contains(mirrorNameValidator().Description(ctx), ".removed") {
		t.Error("the mirror name validator's description does not mention the suffix rule")
	}
}

func TestShortDuration(t *testing.T) {
	for in, want := range map[string]string{"1m0s": "1m", "1h0m0s": "1h", "1h30m0s": "1h30m", "30s": "30s", "1m30s": "1m30s", "500ms": "500ms", "junk": "junk"} {
		if got := shortDuration(in); got != want {
			t.Errorf("shortDuration(%q) = %q, want %q", in, got, want)
		}
	}
}
