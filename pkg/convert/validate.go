package convert

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/config/crd"
)

// origin says which source field an output field came from, so that an output the
// CRD refuses is reported where the user can fix it.
type origin struct {
	kind  string // the output kind
	field string // the output field, a path prefix ("spec.amiSelectorTerms")
	from  string // the source field ("spec.amiSelector")
}

// from records that the output kind's field came from the source's field from.
func (s *source) from(kind, field, from string) {
	s.origins = append(s.origins, origin{kind: kind, field: field, from: from})
}

// sourceField is the source field an output field of kind came from, or "".
func (s *source) sourceField(kind, field string) string {
	for _, o := range s.origins {
		if o.kind == kind && (field == o.field || strings.HasPrefix(field, o.field+".") || strings.HasPrefix(field, o.field+"[")) {
			return o.from
		}
	}
	return ""
}

// validators check objects of the v1 kinds against their CRDs, offline, as the API
// server would on create; keyed by "apiVersion kind". Built once: parsing the
// CRDs' schemas is the slow part.
var validators = sync.OnceValues(func() (map[string]*crd.Validator, error) {
	out := map[string]*crd.Validator{}
	for _, k := range []struct{ apiVersion, kind string }{
		{v1.SchemeGroupVersion.String(), "NodePool"},
		{v1.SchemeGroupVersion.String(), "NodeClaim"},
		{awsv1.SchemeGroupVersion.String(), kindEC2NodeClass},
	} {
		v, err := crd.NewValidator(k.kind)
		if err != nil {
			return nil, err
		}
		out[k.apiVersion+" "+k.kind] = v
	}
	return out, nil
})

// validate checks one output document of s against its kind's CRD, when it is of a
// v1 kind: the schema, its patterns and enums, and the CEL rules. What the CRD
// refuses is an error per field, naming the source object and, where known, the
// source field it came from.
func validate(ctx context.Context, s *source, doc []byte) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	// Numbers as the API server reads them: whole ones as int64, which CEL needs.
	var obj map[string]any
	if err := utiljson.Unmarshal(js, &obj); err != nil || obj == nil {
		return nil // not an object: passed through as it came
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	vs, err := validators()
	if err != nil {
		return err
	}
	v, ok := vs[apiVersion+" "+kind]
	if !ok {
		return nil
	}
	name := ""
	if md, ok := obj["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	// Fields the CRD does not declare: kubectl apply's strict validation refuses
	// them, where the API server alone would drop them without a word.
	if unknown := v.UnknownFields(obj); len(unknown) > 0 {
		where := s.what
		if where != kind+" "+name {
			where += ": becomes " + kind + " " + name
		}
		var errs []error
		for _, f := range unknown {
			errs = append(errs, fmt.Errorf("%s: unknown field %q (%s %s has no such field)", where, f, apiVersion, kind))
		}
		return errors.Join(errs...)
	}
	// Admit prunes and defaults in place: the decoded copy, not the output.
	err = v.Admit(ctx, obj)
	if err == nil {
		return nil
	}
	var status *apierrors.StatusError
	if !errors.As(err, &status) || status.ErrStatus.Details == nil || len(status.ErrStatus.Details.Causes) == 0 {
		return fmt.Errorf("%s: %s %s is not valid %s: %w", s.what, kind, name, apiVersion, err)
	}
	what := fmt.Sprintf("%s %s, which %s does not accept", kind, name, apiVersion)
	if s.passthrough != nil {
		what = "not valid " + apiVersion
	} else if s.what == kind+" "+name {
		what = "the " + apiVersion + " " + kind + " it becomes is not valid"
	} else {
		what = "becomes " + what
	}
	var errs []error
	for _, cause := range status.ErrStatus.Details.Causes {
		where := s.what
		if from := s.sourceField(kind, cause.Field); from != "" {
			where += ": " + from
		}
		errs = append(errs, fmt.Errorf("%s: %s: %s: %s", where, what, cause.Field, cause.Message))
	}
	return errors.Join(errs...)
}
