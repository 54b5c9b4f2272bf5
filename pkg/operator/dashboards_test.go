package operator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// metricRef is a metric name in a PromQL expression, with the label matchers in
// braces right after it.
var metricRef = regexp.MustCompile(`\b((?:karpenter|tailor|operator)_[a-z0-9_]+)(\{[^}]*\})?`)

var labelMatcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)

// exprs collects every "expr" string in a Grafana dashboard.
func exprs(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "expr" {
				*out = append(*out, s)
				continue
			}
			exprs(x, out)
		}
	case []any:
		for _, x := range v {
			exprs(x, out)
		}
	}
}

// The dashboards in the chart query only families Tailor registers, with their
// labels: a renamed metric or label would leave a panel empty without a word.
func TestDashboardsQueryRegisteredMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	files, err := filepath.Glob("../../charts/tailor/dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var dash map[string]any
		if err := json.Unmarshal(data, &dash); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if dash["title"] == nil || dash["uid"] == nil {
			t.Errorf("%s has no title or uid", f)
		}
		var list []string
		exprs(dash, &list)
		if len(list) == 0 {
			t.Errorf("%s has no queries", f)
		}
		for _, e := range list {
			refs := metricRef.FindAllStringSubmatch(e, -1)
			if len(refs) == 0 {
				t.Errorf("%s: %q reads no Tailor metric", filepath.Base(f), e)
			}
			for _, m := range refs {
				name, labels := m[1], registered[m[1]]
				// A summary's quantiles (the registry's descriptions do not say
				// which families are summaries).
				extra := []string{"quantile"}
				if _, ok := registered[name]; !ok {
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if base, cut := strings.CutSuffix(name, suffix); cut {
							if l, ok := registered[base]; ok {
								name, labels = base, l
								if suffix == "_bucket" {
									extra = []string{"le"}
								}
							}
						}
					}
				}
				if _, ok := registered[name]; !ok {
					t.Errorf("%s: %q reads %s, which Tailor does not register", filepath.Base(f), e, m[1])
					continue
				}
				for _, l := range labelMatcher.FindAllStringSubmatch(m[2], -1) {
					if !slices.Contains(labels, l[1]) && !slices.Contains(extra, l[1]) {
						t.Errorf("%s: %q matches label %s, which %s does not have (%v)", filepath.Base(f), e, l[1], name, labels)
					}
				}
			}
		}
	}
}
