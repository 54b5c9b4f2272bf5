package convert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// Input is one manifest file's content: YAML documents (or JSON), Lists expanded.
type Input struct {
	// Name says where the data came from (a file name), for error messages.
	Name string
	Data []byte
}

// Options supply what the old objects do not say.
type Options struct {
	// Role is written as spec.role into each EC2NodeClass whose source names no
	// instance profile (those used the install's default instance profile, which
	// v1 no longer has). Karpenter's guides call it KarpenterNodeRole-<cluster>.
	Role string
	// InstanceProfile is written instead of Role, when set.
	InstanceProfile string
}

// Warning is something that could not be carried over, or that changed meaning.
type Warning struct {
	// Object is the source object, as "Kind name".
	Object string
	// Field is the source field, as a path ("spec.kubeletConfiguration.containerRuntime").
	Field   string
	Message string

	order int // the source object's position, to list warnings in input order
}

func (w Warning) String() string {
	if w.Field == "" {
		return w.Object + ": " + w.Message
	}
	return w.Object + ": " + w.Field + ": " + w.Message
}

// Result is the converted manifest.
type Result struct {
	// Documents are the output objects as YAML, in input order: converted objects
	// where their sources were (a Provisioner's NodePool followed by the
	// EC2NodeClass made from its inline provider), others unchanged.
	Documents [][]byte
	Warnings  []Warning
}

// YAML joins the documents into one multi-document stream.
func (r *Result) YAML() []byte {
	var b bytes.Buffer
	for i, d := range r.Documents {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(d)
		if len(d) > 0 && d[len(d)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// API versions read and written.
const (
	v1alpha5         = "karpenter.sh/v1alpha5"
	awsV1alpha1      = "karpenter.k8s.aws/v1alpha1"
	coreV1beta1      = "karpenter.sh/v1beta1"
	awsV1beta1       = "karpenter.k8s.aws/v1beta1"
	kindEC2NodeClass = "EC2NodeClass"
)

// Convert converts every object of the inputs it knows and passes the others
// through unchanged. An object that cannot be converted, or that converts to one
// its v1 CRD refuses (checked offline, as the API server would), is an error naming
// the object and the field; all such errors are returned together.
func Convert(inputs []Input, opts Options) (*Result, error) {
	c := &converter{opts: opts, classes: map[string]*class{}}
	var errs []error
	for _, in := range inputs {
		if err := c.split(in); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Node classes first, so that NodePools can move their kubelet settings into
	// the classes they name.
	for _, s := range c.sources {
		if err := c.convertClass(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.what, err))
		}
	}
	for _, s := range c.sources {
		if err := c.convertPool(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.what, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.placeKubelets()
	if err := c.checkNames(); err != nil {
		return nil, err
	}
	res := &Result{}
	for _, s := range c.sources {
		for _, obj := range s.out {
			doc, err := render(obj)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.what, err)
			}
			errs = append(errs, validate(context.Background(), s, doc))
			res.Documents = append(res.Documents, doc)
		}
		if s.passthrough != nil {
			errs = append(errs, validate(context.Background(), s, s.passthrough))
			res.Documents = append(res.Documents, s.passthrough)
		}
	}
	// Output the API server would refuse is an error, not a file to find out with.
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortStableFunc(c.warnings, func(a, b Warning) int { return a.order - b.order })
	res.Warnings = c.warnings
	return res, nil
}

type converter struct {
	opts     Options
	sources  []*source
	classes  map[string]*class
	warnings []Warning
	// kubelets are the NodePools' kubelet settings, in input order, to be moved
	// into their EC2NodeClasses once all are converted.
	kubelets []kubeletRequest
}

// source is one input object and what it became.
type source struct {
	order            int
	what             string // "Kind name"
	apiVersion, kind string
	json             []byte
	// passthrough is the object's YAML, when it is not converted.
	passthrough []byte
	// out are the converted objects, in output order.
	out []object
	// pool is the converted NodePool, if any.
	pool *v1.NodePool
	// origins map output fields back to the source fields they came from.
	origins []origin
}

// object is a converted object.
type object interface {
	runtime.Object
	metav1.Object
}

// class is an EC2NodeClass being made, by name.
type class struct {
	obj *awsv1.EC2NodeClass
	src *source
}

// checkNames refuses two converted objects of one kind and name: applied together,
// the second would silently replace the first.
func (c *converter) checkNames() error {
	made := map[string]*source{}
	var errs []error
	for _, s := range c.sources {
		for _, obj := range s.out {
			key := obj.GetObjectKind().GroupVersionKind().Kind + " " + obj.GetName()
			if first, ok := made[key]; ok && first != s {
				errs = append(errs, fmt.Errorf("%s: makes %s, as %s does; rename one of them", s.what, key, first.what))
				continue
			}
			made[key] = s
		}
	}
	return errors.Join(errs...)
}

func (c *converter) warn(s *source, field, format string, args ...any) {
	c.warnings = append(c.warnings, Warning{Object: s.what, Field: field, Message: fmt.Sprintf(format, args...), order: s.order})
}

// split reads the documents of one input.
func (c *converter) split(in Input) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(in.Data)))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", in.Name, doc, err)
		}
		if isBlank(raw) {
			continue
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return fmt.Errorf("%s: document %d: not YAML or JSON: %w", in.Name, doc, err)
		}
		var obj map[string]any
		if err := json.Unmarshal(js, &obj); err != nil {
			return fmt.Errorf("%s: document %d: not a Kubernetes object: %w", in.Name, doc, err)
		}
		if err := c.add(obj, js, raw, fmt.Sprintf("%s: document %d", in.Name, doc)); err != nil {
			return err
		}
	}
}

// add records one object, or the items of a List.
func (c *converter) add(obj map[string]any, js, raw []byte, where string) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return fmt.Errorf("%s: apiVersion and kind are required", where)
	}
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		for i, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: item %d: not an object", where, i)
			}
			itemJSON, err := json.Marshal(m)
			if err != nil {
				return err
			}
			itemYAML, err := yaml.JSONToYAML(itemJSON)
			if err != nil {
				return err
			}
			if err := c.add(m, itemJSON, itemYAML, fmt.Sprintf("%s: item %d", where, i)); err != nil {
				return err
			}
		}
		return nil
	}
	name := ""
	if md, ok := obj["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	s := &source{order: len(c.sources), what: kind + " " + name, apiVersion: apiVersion, kind: kind, json: js}
	if !converts(apiVersion, kind) {
		s.passthrough = bytes.TrimLeft(raw, "\n")
		if apiVersion == v1alpha5 && kind == "Machine" {
			s.passthrough = nil
			c.warn(s, "", "not converted: Machines are made by the controller for its Provisioners; Tailor makes NodeClaims for its NodePools")
		}
	} else if name == "" {
		return fmt.Errorf("%s: %s: metadata.name is required", where, kind)
	}
	c.sources = append(c.sources, s)
	return nil
}

func converts(apiVersion, kind string) bool {
	switch apiVersion + "/" + kind {
	case v1alpha5 + "/Provisioner", awsV1alpha1 + "/AWSNodeTemplate",
		coreV1beta1 + "/NodePool", coreV1beta1 + "/NodeClaim", awsV1beta1 + "/EC2NodeClass":
		return true
	}
	return false
}

func isBlank(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// decode reads a source object into its typed form. Fields the type does not
// have become warnings (as the old API servers pruned them); a field of the wrong
// shape is an error naming it.
func (c *converter) decode(s *source, into any, hint func(field string) string) error {
	strict, err := kjson.UnmarshalStrict(s.json, into)
	if err != nil {
		return decodeError(err)
	}
	for _, e := range strict {
		var fe kjson.FieldError
		if !errors.As(e, &fe) {
			c.warn(s, "", "%v", e)
			continue
		}
		msg := strings.TrimPrefix(e.Error(), "json: ")
		if strings.HasPrefix(msg, "unknown field") {
			msg = "not a field of " + s.apiVersion + " " + s.kind + "; not carried over"
			if h := hint(fe.FieldPath()); h != "" {
				msg += " (" + h + ")"
			}
		}
		c.warn(s, fe.FieldPath(), "%s", msg)
	}
	return nil
}

var typeError = regexp.MustCompile(`^json: cannot unmarshal (\S+) into Go struct field [^.]*\.(\S+) of type (.+)$`)

// decodeError rewrites the JSON decoder's type errors to name the field in the
// manifest's terms.
func decodeError(err error) error {
	m := typeError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	return fmt.Errorf("%s: got %s, want %s", m[2], article(m[1]), describeType(m[3]))
}

func article(jsonType string) string {
	switch jsonType {
	case "object", "array":
		return "an " + jsonType
	}
	return "a " + jsonType
}

func describeType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		return "a map of " + strings.TrimPrefix(goType[strings.Index(goType, "]")+1:], "*") + " values"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.Contains(goType, "int"):
		return "an integer"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return "an object"
}
