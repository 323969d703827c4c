package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// TestAccPlanTimeErrors: configurations the provider refuses at plan time, before any
// worker is asked (the provider points at a port where nothing listens).
func TestAccPlanTimeErrors(t *testing.T) {
	// Not parallel: t.Setenv clears the environment fallbacks for the missing-URL case.
	t.Setenv(envWorkerURL, "")
	t.Setenv(envWorkerToken, "")
	const provider = `
provider "kafkamirror" {
  worker_url   = "http://127.0.0.1:9"
  worker_token = "unused"
}
`
	mirror := func(name string) string {
		return provider + `
resource "kafkamirror_cluster_mirror" "m" {
  name   = "` + name + `"
  source = { bootstrap_servers = ["127.0.0.1:9092"] }
}
`
	}
	topic := func(attrs string) string {
		return provider + `
resource "kafkamirror_mirror_topic" "t" {
  mirror_name = "m"
  topic       = "orders"
  ` + attrs + `
}
`
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: (&planRecorder{}).factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config:      mirror("orders mirror!"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid cluster mirror name`, `contains ' ' at position 6`),
			},
			{
				Config:      mirror("eu-to-us.paused"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid cluster mirror name`, `must not end in ".paused"`),
			},
			{
				Config:      topic(`state = "running"`),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid Attribute Value Match`, `value must be one of: ["mirroring" "paused" "stopped"]`, `got: "running"`),
			},
			{
				Config:      topic(`divergence = "ignore"`),
				PlanOnly:    true,
				ExpectError: wrapped(`value must be one of: ["fail" "recreate"]`),
			},
			{
				Config:      topic(`state = "stopped"`),
				PlanOnly:    true,
				ExpectError: wrapped(`Cannot create a stopped mirror topic`, `terraform import`),
			},
			{
				Config: provider + `
resource "kafkamirror_cluster_mirror" "m" {
  name   = "m"
  source = { bootstrap_servers = ["kafka-1.example.com"] }
}
`,
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid broker address`, `"kafka-1.example.com" is not a host:port address`),
			},
			{
				Config: `
provider "kafkamirror" {
  worker_token = "t"
}

resource "kafkamirror_mirror_topic" "t" {
  mirror_name = "m"
  topic       = "orders"
}
`,
				PlanOnly:    true,
				ExpectError: wrapped(`Missing kafkamirror worker URL`, `KAFKAMIRROR_WORKER_URL`),
			},
		},
	})
}

// TestAccPasswordAlternatives: exactly one of password and password_wo.
func TestAccPasswordAlternatives(t *testing.T) {
	t.Parallel()
	config := func(secrets string) string {
		return `
provider "kafkamirror" {
  worker_url   = "http://127.0.0.1:9"
  worker_token = "unused"
}

resource "kafkamirror_cluster_mirror" "m" {
  name = "m"
  source = {
    bootstrap_servers = ["127.0.0.1:9092"]
    sasl = {
      mechanism = "SCRAM-SHA-256"
      username  = "u"
      ` + secrets + `
    }
  }
}
`
	}
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)}, // password_wo
		ProtoV6ProviderFactories: (&planRecorder{}).factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config:      config("password = \"p\"\n      password_wo = \"p\""),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid Attribute Combination`, `password_wo`),
			},
			{
				Config:      config(""),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid Attribute Combination`, `password_wo`),
			},
			{
				Config:      config("password = \"p\"\n      password_wo_version = 2"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid Attribute Combination`, `password_wo`),
			},
		},
	})
}
