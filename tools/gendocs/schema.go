package main

// The provider's schema in the JSON form of `terraform providers schema -json`, built in
// process from the provider's own GetProviderSchema answer. tfplugindocs reads it through
// --providers-schema, so generating the docs needs neither a provider build nor a terraform
// CLI, and the result does not depend on the CLI's version (a CLI before 1.11 would drop
// the write-only flags from the schema, and with them the docs' "Write-only" markers).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/zclconf/go-cty/cty"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/provider"
)

// providerSchemasJSON returns the provider's schemas as terraform prints them.
func providerSchemasJSON() ([]byte, error) {
	server, err := providerserver.NewProtocol6WithError(provider.New("dev")())()
	if err != nil {
		return nil, err
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, d := range resp.Diagnostics {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			errs = append(errs, fmt.Errorf("%s: %s", d.Summary, d.Detail))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the provider's schema: %w", err)
	}
	ps := &tfjson.ProviderSchema{
		ResourceSchemas:   map[string]*tfjson.Schema{},
		DataSourceSchemas: map[string]*tfjson.Schema{},
	}
	if ps.ConfigSchema, err = convertSchema(resp.Provider); err != nil {
		return nil, err
	}
	for name, s := range resp.ResourceSchemas {
		if ps.ResourceSchemas[name], err = convertSchema(s); err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
	}
	for name, s := range resp.DataSourceSchemas {
		if ps.DataSourceSchemas[name], err = convertSchema(s); err != nil {
			return nil, fmt.Errorf("data source %s: %w", name, err)
		}
	}
	return json.Marshal(&tfjson.ProviderSchemas{
		FormatVersion: "1.0",
		Schemas:       map[string]*tfjson.ProviderSchema{"registry.terraform.io/hashicorp/" + providerName: ps},
	})
}

func convertSchema(s *tfprotov6.Schema) (*tfjson.Schema, error) {
	if s == nil {
		return nil, nil
	}
	b, err := convertBlock(s.Block)
	return &tfjson.Schema{Version: uint64(s.Version), Block: b}, err
}

func convertBlock(b *tfprotov6.SchemaBlock) (*tfjson.SchemaBlock, error) {
	out := &tfjson.SchemaBlock{Description: b.Description, DescriptionKind: descriptionKind(b.DescriptionKind), Deprecated: b.Deprecated}
	var err error
	if out.Attributes, err = convertAttributes(b.Attributes); err != nil {
		return nil, err
	}
	if len(b.BlockTypes) > 0 {
		out.NestedBlocks = map[string]*tfjson.SchemaBlockType{}
	}
	for _, nb := range b.BlockTypes {
		inner, err := convertBlock(nb.Block)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", nb.TypeName, err)
		}
		out.NestedBlocks[nb.TypeName] = &tfjson.SchemaBlockType{
			NestingMode: nestingMode(nb.Nesting), Block: inner, MinItems: uint64(nb.MinItems), MaxItems: uint64(nb.MaxItems),
		}
	}
	return out, nil
}

func convertAttributes(attrs []*tfprotov6.SchemaAttribute) (map[string]*tfjson.SchemaAttribute, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	out := map[string]*tfjson.SchemaAttribute{}
	for _, a := range attrs {
		ja := &tfjson.SchemaAttribute{
			Description: a.Description, DescriptionKind: descriptionKind(a.DescriptionKind), Deprecated: a.Deprecated,
			Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive, WriteOnly: a.WriteOnly,
		}
		if a.NestedType != nil {
			inner, err := convertAttributes(a.NestedType.Attributes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.Name, err)
			}
			ja.AttributeNestedType = &tfjson.SchemaNestedAttributeType{Attributes: inner, NestingMode: nestingMode(a.NestedType.Nesting)}
		} else {
			t, err := ctyType(a.Type)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.Name, err)
			}
			ja.AttributeType = t
		}
		out[a.Name] = ja
	}
	return out, nil
}

// nestingMode converts a block's or a nested attribute's nesting mode: the protocol names them
// as terraform's JSON does, in capitals ("LIST" is "list").
func nestingMode(m fmt.Stringer) tfjson.SchemaNestingMode {
	return tfjson.SchemaNestingMode(strings.ToLower(m.String()))
}

// ctyType converts an attribute type to cty's, as terraform does when it prints schemas.
func ctyType(t tftypes.Type) (cty.Type, error) {
	switch {
	case t == nil:
		return cty.NilType, errors.New("no type")
	case t.Is(tftypes.String):
		return cty.String, nil
	case t.Is(tftypes.Number):
		return cty.Number, nil
	case t.Is(tftypes.Bool):
		return cty.Bool, nil
	case t.Is(tftypes.DynamicPseudoType):
		return cty.DynamicPseudoType, nil
	}
	switch tt := t.(type) {
	case tftypes.List:
		e, err := ctyType(tt.ElementType)
		return cty.List(e), err
	case tftypes.Set:
		e, err := ctyType(tt.ElementType)
		return cty.Set(e), err
	case tftypes.Map:
		e, err := ctyType(tt.ElementType)
		return cty.Map(e), err
	case tftypes.Object:
		attrs := map[string]cty.Type{}
		var optional []string
		for name, at := range tt.AttributeTypes {
			c, err := ctyType(at)
			if err != nil {
				return cty.NilType, fmt.Errorf("%s: %w", name, err)
			}
			attrs[name] = c
			if _, ok := tt.OptionalAttributes[name]; ok {
				optional = append(optional, name)
			}
		}
		if len(optional) > 0 {
			return cty.ObjectWithOptionalAttrs(attrs, optional), nil
		}
		return cty.Object(attrs), nil
	case tftypes.Tuple:
		elems := make([]cty.Type, len(tt.ElementTypes))
		for i, et := range tt.ElementTypes {
			c, err := ctyType(et)
			if err != nil {
				return cty.NilType, err
			}
			elems[i] = c
		}
		return cty.Tuple(elems), nil
	}
	return cty.NilType, fmt.Errorf("unsupported type %s", t)
}

func descriptionKind(k tfprotov6.StringKind) tfjson.SchemaDescriptionKind {
	if k == tfprotov6.StringKindMarkdown {
		return tfjson.SchemaDescriptionKindMarkdown
	}
	return tfjson.SchemaDescriptionKindPlain
}
