package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// nameValidator checks a cluster mirror name or a topic name at plan time.
type nameValidator struct {
	what    string // "cluster mirror name" or "topic name"
	problem func(string) string
}

var (
	_ validator.String = nameValidator{}
	_ validator.String = durationValidator{}
	_ validator.String = hostPortValidator{}
	_ validator.String = regexValidator{}
)

// mirrorNameValidator applies the KIP's cluster mirror name rules.
func mirrorNameValidator() validator.String {
	return nameValidator{what: "cluster mirror name", problem: kip.MirrorNameProblem}
}

// topicNameValidator applies Kafka's topic name rules.
func topicNameValidator() validator.String {
	return nameValidator{what: "topic name", problem: kip.TopicNameProblem}
}

func (v nameValidator) Description(context.Context) string {
	if v.what == "cluster mirror name" {
		return "a legal Kafka topic name (at most 249 ASCII letters, digits, '.', '_' and '-') that does not end in \".paused\" or \".removed\""
	}
	return "a legal Kafka topic name (at most 249 ASCII letters, digits, '.', '_' and '-')"
}

func (v nameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v nameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	name := req.ConfigValue.ValueString()
	if p := v.problem(name); p != "" {
		shown := name
		if len(shown) > 64 {
			shown = shown[:64] + "..."
		}
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+v.what,
			fmt.Sprintf("The %s %q %s. KIP-1279 names follow Kafka's topic-name rules.", v.what, shown, p))
	}
}

// durationValidator accepts a Go duration such as "30s" or "1m" within a range, the one
// the worker enforces.
type durationValidator struct{ r api.DurationRange }

func (v durationValidator) Description(context.Context) string {
	return fmt.Sprintf(`a duration such as "30s", "1m" or "1h30m", %s`, v.r)
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := v.r.Parse(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration", err.Error()+".")
	}
}

// hostPortValidator accepts a broker address, host:port with a port in 1-65535.
type hostPortValidator struct{}

func (hostPortValidator) Description(context.Context) string {
	return `a host:port address such as "kafka-1.example.com:9092"`
}

func (v hostPortValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (hostPortValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := api.CheckBrokerAddress(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid broker address",
			err.Error()+". Give each bootstrap server as host:port, for example \"kafka-1.example.com:9092\".")
	}
}

// regexValidator accepts a regular expression in Go's RE2 syntax, the syntax the worker
// matches topic names with.
type regexValidator struct{}

func (regexValidator) Description(context.Context) string {
	return "a regular expression in RE2 syntax"
}

func (v regexValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (regexValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := regexp.Compile(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid regular expression",
			fmt.Sprintf("%q is not a regular expression in RE2 syntax: %v.", req.ConfigValue.ValueString(), err))
	}
}
