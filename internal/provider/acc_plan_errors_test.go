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
	mirrorWith := func(bootstrap, interval string) string {
		return provider + `
resource "kafkamirror_cluster_mirror" "m" {
  name   = "m"
  source = { bootstrap_servers = ["` + bootstrap + `"] }
  sync   = { interval = "` + interval + `" }
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
				Config:      mirrorWith("kafka-1.example.com", "1m"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid broker address`, `"kafka-1.example.com" is not host:port`),
			},
			{
				Config:      mirrorWith("127.0.0.1:99999", "1m"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid broker address`, `"127.0.0.1:99999" has port "99999"; a port is a number from 1 to 65535`),
			},
			{
				Config:      mirrorWith(":9092", "1m"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid broker address`, `":9092" has no host`),
			},
			{
				Config: `
provider "kafkamirror" {
  worker_url   = "http://127.0.0.1:9"
  worker_token = "unused"
  destination  = { bootstrap_servers = ["127.0.0.1:0"] }
}

resource "kafkamirror_mirror_topic" "t" {
  mirror_name = "m"
  topic       = "orders"
}
`,
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid broker address`, `"127.0.0.1:0" has port "0"`),
			},
			{
				Config:      mirrorWith("127.0.0.1:9092", "1ns"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid duration`, `"1ns" is out of range: it must be from 1s to 24h`),
			},
			{
				Config:      mirrorWith("127.0.0.1:9092", "25h"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid duration`, `"25h" is out of range: it must be from 1s to 24h`),
			},
			{
				Config:      mirrorWith("127.0.0.1:9092", "often"),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid duration`, `"often" is not a duration`),
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
