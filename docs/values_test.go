package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestInstallDocumentsEveryValue keeps the values table of install.md complete: every
// value of charts/tailor/values.yaml must be named, by its full dotted path in
// backticks, in the first column of that table. A mapping is descended into unless
// the table names the mapping itself: then it counts as one value, which is how a
// value the chart hands to Kubernetes whole is documented (`affinity`,
// `controller.resources`, `podAnnotations`). Lists and empty mappings are values.
func TestInstallDocumentsEveryValue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "charts", "tailor", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	doc, err := os.ReadFile("install.md")
	if err != nil {
		t.Fatal(err)
	}
	named := valuesTable(string(doc))
	if len(named) == 0 {
		t.Fatal("install.md: no values table (a \"## Values\" section whose table names values in backticks)")
	}
	missing := undocumented(values, "", named)
	for _, path := range missing {
		t.Errorf("charts/tailor/values.yaml: %s is not in the values table of docs/install.md", path)
	}
	// A row for a value the chart no longer has is as misleading as a missing one.
	for path := range named {
		if !hasPath(values, path) {
			t.Errorf("docs/install.md: the values table names %s, which charts/tailor/values.yaml does not have", path)
		}
	}
}

var backticked = regexp.MustCompile("`([^`]+)`")

// valuesTable returns the paths named in backticks in the first column of the
// table under "## Values".
func valuesTable(doc string) map[string]bool {
	named := map[string]bool{}
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Values"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			named[m[1]] = true
		}
	}
	return named
}

// undocumented returns, sorted, the paths under prefix that named does not cover.
func undocumented(v any, prefix string, named map[string]bool) []string {
	if prefix != "" && named[prefix] {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		if prefix == "" {
			return nil
		}
		return []string{prefix}
	}
	var out []string
	for key, child := range m {
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		out = append(out, undocumented(child, path, named)...)
	}
	slices.Sort(out)
	return out
}

// hasPath reports whether the dotted path names a value in v.
func hasPath(v any, path string) bool {
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[key]; !ok {
			return false
		}
	}
	return true
}

func TestUndocumented(t *testing.T) {
	values := map[string]any{
		"replicas":    2,
		"affinity":    map[string]any{"nodeAffinity": map[string]any{"x": 1}},
		"podLabels":   map[string]any{},
		"tolerations": []any{map[string]any{"key": "a"}},
		"controller": map[string]any{
			"image":   map[string]any{"repository": "r", "tag": ""},
			"metrics": map[string]any{"port": 8080},
		},
	}
	named := map[string]bool{"replicas": true, "affinity": true, "controller.image.tag": true}
	got := undocumented(values, "", named)
	want := []string{"controller.image.repository", "controller.metrics.port", "podLabels", "tolerations"}
	if !slices.Equal(got, want) {
		t.Errorf("undocumented = %v, want %v", got, want)
	}
	if !hasPath(values, "controller.metrics.port") || hasPath(values, "controller.metrics.host") || hasPath(values, "replicas.x") {
		t.Error("hasPath is wrong")
	}
}
