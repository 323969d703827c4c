// Command terraform-provider-kafkamirror is the kafkamirror Terraform provider: it drives a
// kafkamirror worker (Apache Kafka KIP-1279 cluster mirroring from outside the brokers)
// through the worker's HTTP API.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/provider"
)

// Format the examples, then generate docs/ from templates/, examples/ and the provider's
// schema. tools/gendocs finds the terraform CLI (TF_ACC_TERRAFORM_PATH, PATH or
// /usr/local/bin) and never downloads one; it runs
// `go tool tfplugindocs generate --provider-name kafkamirror`.
//go:generate go run ./tools/gendocs

var (
	// version is set by goreleaser to the release version; "dev" for local builds.
	version = "dev"
)

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "set to true to run the provider with support for debuggers like delve")
	flag.Parse()

	opts := providerserver.ServeOpts{
		Address: "registry.terraform.io/kafkamirror/kafkamirror",
		Debug:   debug,
	}
	if err := providerserver.Serve(context.Background(), provider.New(version), opts); err != nil {
		log.Fatal(err.Error())
	}
}
