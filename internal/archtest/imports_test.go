// Package archtest keeps the layering the design depends on: the decision packages
// and the API types stay pure, free of clients, controllers and metrics, so they can
// be tested (and run by tailor simulate) without a cluster; and the controllers stay
// independent of each other (controllers_test.go). .golangci.yaml states the purity
// rules for depguard; these tests enforce them in `make test`.
package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pure are the trees whose non-test code may not import what denied lists.
var (
	pure   = []string{"pkg/scheduling", "pkg/disruption", "api"}
	denied = []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "github.com/prometheus"}
)

func TestPurePackagesImportNoClients(t *testing.T) {
	checked := 0
	for _, tree := range pure {
		root := filepath.Join("..", "..", tree)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			checked++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range denied {
					if p == bad || strings.HasPrefix(p, bad+"/") {
						t.Errorf("%s imports %s: %s must stay free of %s", path, p, tree, strings.Join(denied, ", "))
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d files checked: the trees moved?", checked)
	}
}
