// Command gendocs formats the examples and generates the provider's documentation (docs/)
// with tfplugindocs, from templates/, examples/ and the provider's schema:
//
//	go generate ./...                 (main.go's //go:generate runs this)
//	go run ./tools/gendocs -check     fail when docs/ or the examples' formatting is stale
//
// The schema comes from the provider itself, in process (schema.go), and is handed to
// tfplugindocs with --providers-schema: tfplugindocs then neither builds the provider nor
// looks for (or downloads) a terraform CLI. The CLI is used only for `terraform fmt` of the
// examples, when one is found (TF_ACC_TERRAFORM_PATH, PATH, /usr/local/bin/terraform);
// gendocs never downloads one.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

const providerName = "kafkamirror"

func main() {
	check := flag.Bool("check", false, "do not write: fail when docs/ differs from what would be generated, or the examples are not formatted")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gendocs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	schemas, err := providerSchemasJSON()
	if err != nil {
		return err
	}
	schemaFile := filepath.Join(tmp, "schema.json")
	if err := os.WriteFile(schemaFile, schemas, 0o644); err != nil {
		return err
	}
	env := append(os.Environ(), "CHECKPOINT_DISABLE=1")
	if err := formatExamples(filepath.Join(root, "examples"), check, env); err != nil {
		return err
	}
	args := []string{"generate", "--provider-name", providerName, "--provider-dir", root, "--providers-schema", schemaFile}
	if !check {
		return tfplugindocs(root, env, args...)
	}
	rendered := filepath.Join(tmp, "docs")
	// tfplugindocs joins the output directory to the provider directory, so it is given
	// relative to the module root.
	rel, err := filepath.Rel(root, rendered)
	if err != nil {
		return err
	}
	if err := tfplugindocs(root, env, append(args, "--rendered-website-dir", rel)...); err != nil {
		return err
	}
	if diff := compareTrees(filepath.Join(root, "docs"), rendered); len(diff) > 0 {
		return fmt.Errorf("docs/ is stale; run go generate ./... and commit the result:\n  %s", strings.Join(diff, "\n  "))
	}
	return tfplugindocs(root, env, "validate", "--provider-name", providerName, "--provider-dir", root, "--providers-schema", schemaFile)
}

// formatExamples runs terraform fmt over the examples (-check: only reports). Without a
// terraform CLI it says so and skips: the docs do not depend on it.
func formatExamples(dir string, check bool, env []string) error {
	tf, err := findTerraform()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: examples not formatted:", err)
		return nil
	}
	args := []string{"fmt", "-recursive"}
	if check {
		args = append(args, "-check", "-diff")
	}
	var out bytes.Buffer
	cmd := exec.Command(tf, append(args, dir)...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
	if err := cmd.Run(); err != nil {
		if check {
			return fmt.Errorf("the examples are not formatted (run go generate ./...):\n%s", out.String())
		}
		return fmt.Errorf("terraform fmt of the examples: %w\n%s", err, out.String())
	}
	return nil
}

func tfplugindocs(root string, env []string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("go", append([]string{"tool", "tfplugindocs"}, args...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = root, env, &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tfplugindocs %s: %w\n%s", args[0], err, out.String())
	}
	return nil
}

// findTerraform returns the terraform CLI to use; it never downloads one.
func findTerraform() (string, error) {
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("TF_ACC_TERRAFORM_PATH=%s: %w", p, err)
		}
		return filepath.Abs(p)
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		return filepath.Abs(p)
	}
	if _, err := os.Stat("/usr/local/bin/terraform"); err == nil {
		return "/usr/local/bin/terraform", nil
	}
	return "", errors.New("no terraform CLI found (TF_ACC_TERRAFORM_PATH, PATH, /usr/local/bin/terraform); this tool never downloads one")
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the module (no go.mod above the working directory)")
		}
		dir = parent
	}
}

// compareTrees lists the files that differ between two directories.
func compareTrees(want, got string) []string {
	read := func(dir string) map[string][]byte {
		files := map[string][]byte{}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)], _ = os.ReadFile(p)
			return nil
		})
		return files
	}
	a, b := read(want), read(got)
	var out []string
	for name, data := range a {
		other, ok := b[name]
		switch {
		case !ok:
			out = append(out, "docs/"+name+": would no longer be generated")
		case !bytes.Equal(data, other):
			out = append(out, "docs/"+name+": differs from the generated version")
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			out = append(out, "docs/"+name+": missing")
		}
	}
	slices.Sort(out)
	return out
}
