// Command crdpatch adds to the CRDs controller-gen wrote the validation their Go
// types cannot carry: the patterns Karpenter's published CRDs put on taint keys
// and values and on NodePool label values (fields of corev1.Taint and values of a
// map take no markers). Karpenter patches its generated CRDs the same way; the
// rules are its API's, checked against its CRDs by config/crd's
// TestValidationAgreesWithKarpenter.
//
//	go run ./hack/crdpatch DIR
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// qualifiedName is a taint key (and, as Karpenter has it, a taint value): an
// optional DNS-subdomain prefix and a name.
const qualifiedName = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`

// labelValue is a label value.
const labelValue = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`

// patches are, per CRD file, the schema properties (paths below a version's spec
// schema, through properties) and what to set on each.
var patches = map[string][]struct {
	path []string
	set  map[string]any
}{
	"karpenter.sh_nodepools.yaml": {
		{[]string{"template", "spec", "taints", "[]", "key"}, map[string]any{"minLength": 1, "pattern": qualifiedName}},
		{[]string{"template", "spec", "taints", "[]", "value"}, map[string]any{"pattern": qualifiedName}},
		{[]string{"template", "spec", "startupTaints", "[]", "key"}, map[string]any{"minLength": 1, "pattern": qualifiedName}},
		{[]string{"template", "spec", "startupTaints", "[]", "value"}, map[string]any{"pattern": qualifiedName}},
		{[]string{"template", "metadata", "labels", "{}"}, map[string]any{"maxLength": 63, "pattern": labelValue}},
	},
	"karpenter.sh_nodeclaims.yaml": {
		{[]string{"taints", "[]", "key"}, map[string]any{"minLength": 1, "pattern": qualifiedName}},
		{[]string{"taints", "[]", "value"}, map[string]any{"pattern": qualifiedName}},
		{[]string{"startupTaints", "[]", "key"}, map[string]any{"minLength": 1, "pattern": qualifiedName}},
		{[]string{"startupTaints", "[]", "value"}, map[string]any{"pattern": qualifiedName}},
	},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch DIR")
		os.Exit(2)
	}
	for file, list := range patches {
		if err := patchFile(filepath.Join(os.Args[1], file), func(spec map[string]any) error {
			for _, p := range list {
				s, err := schemaAt(spec, p.path)
				if err != nil {
					return err
				}
				for k, v := range p.set {
					s[k] = v
				}
			}
			return nil
		}); err != nil {
			fmt.Fprintf(os.Stderr, "crdpatch: %s: %v\n", file, err)
			os.Exit(1)
		}
	}
}

// patchFile applies patch to the spec schema of every version of the CRD in file
// and writes it back as controller-gen writes it.
func patchFile(file string, patch func(spec map[string]any) error) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(bytes.TrimPrefix(data, []byte("---\n")), &crd); err != nil {
		return err
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("no versions")
	}
	for _, v := range versions {
		spec, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec").(map[string]any)
		if !ok {
			return fmt.Errorf("a version has no spec schema")
		}
		if err := patch(spec); err != nil {
			return err
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(file, append([]byte("---\n"), out...), 0o644)
}

// schemaAt walks path from schema s: a name is a property, "[]" the items of an
// array, "{}" the values of a map.
func schemaAt(s map[string]any, path []string) (map[string]any, error) {
	for _, step := range path {
		var next any
		switch step {
		case "[]":
			next = s["items"]
		case "{}":
			next = s["additionalProperties"]
		default:
			next = dig(s, "properties", step)
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no schema at %v (stopped at %q)", path, step)
		}
		s = m
	}
	return s, nil
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
