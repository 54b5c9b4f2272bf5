package convert_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodetailor/tailor/pkg/convert"
)

// Convert never panics, and whatever it returns without error renders as YAML the
// converted kinds' Go types read strictly.
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("../../cmd/tailor/testdata/convert/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(template + "---\n" + provisioner("p", "kubeletConfiguration: {maxPods: 3}", "consolidation: {enabled: true}")))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := convert.Convert([]convert.Input{{Name: "fuzz.yaml", Data: data}}, role)
		if err != nil {
			return
		}
		_ = res.YAML()
		for _, w := range res.Warnings {
			if w.Object == "" || w.Message == "" {
				t.Errorf("warning without an object or message: %+v", w)
			}
		}
	})
}
