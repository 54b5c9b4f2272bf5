package crd

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Validator checks objects of one kind against its CRD offline, the way the API
// server does on create: prune unknown fields, apply defaults, validate the OpenAPI
// schema and the CEL rules. Tools that take NodePools from files (tailor simulate)
// reject exactly what `kubectl apply` would, with the same messages.
type Validator struct {
	gk         schema.GroupKind
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// NewValidator builds the validator for a kind of the embedded CRDs.
func NewValidator(kind string) (*Validator, error) {
	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		if c.Spec.Names.Kind != kind {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(c.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", c.Name, err)
		}
		structural, err := structuralschema.NewStructural(internal)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", c.Name, err)
		}
		sv, _, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", c.Name, err)
		}
		return &Validator{
			gk:         schema.GroupKind{Group: c.Spec.Group, Kind: kind},
			structural: structural,
			schema:     sv,
			cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
		}, nil
	}
	return nil, fmt.Errorf("no CRD for kind %s", kind)
}

// Admit prunes, defaults and validates obj (a decoded JSON object) in place. The
// error, if any, is the API server's Invalid error for the object.
func (v *Validator) Admit(ctx context.Context, obj map[string]any) error {
	pruning.PruneWithOptions(obj, v.structural, true, structuralschema.UnknownFieldPathOptions{})
	defaulting.Default(obj, v.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, v.schema)
	if len(errs) == 0 {
		celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	if len(errs) == 0 {
		return nil
	}
	name := ""
	if md, ok := obj["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	return apierrors.NewInvalid(v.gk, name, field.ErrorList(errs))
}

// UnknownFields names the fields of obj (a decoded JSON object) that the CRD does
// not declare, metadata's included, as the API server's strict field validation
// (kubectl apply's default) names them before refusing the object:
// "spec.template.spec.terminationGracePeirod". obj is left unchanged; Admit drops
// these fields, as the API server does without strict validation.
func (v *Validator) UnknownFields(obj map[string]any) []string {
	copied := runtime.DeepCopyJSON(obj)
	// Malformed metadata is Admit's to report; only the unknown fields count here.
	_, _, paths, _ := objectmeta.GetObjectMetaWithOptions(copied, objectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	return append(paths, pruning.PruneWithOptions(copied, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
}
