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

const testobj = module + "/internal/testobj"

// testobjImportAllowed says whether internal/testobj, the tests' object builders,
// may import imp: the standard library, the API types and nothing that runs.
func testobjImportAllowed(imp string) bool {
	if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
		return true // the standard library
	}
	for _, ok := range []string{"k8s.io/api/", "k8s.io/apimachinery/", module + "/api/"} {
		if strings.HasPrefix(imp, ok) {
			return true
		}
	}
	return false
}

func TestTestObjImportAllowed(t *testing.T) {
	for imp, want := range map[string]bool{
		"fmt":                                       true,
		"k8s.io/api/core/v1":                        true,
		"k8s.io/apimachinery/pkg/api/resource":      true,
		module + "/api/v1":                          true,
		module + "/pkg/scheduling":                  false,
		"sigs.k8s.io/controller-runtime/pkg/client": false,
		"k8s.io/client-go/kubernetes":               false,
	} {
		if got := testobjImportAllowed(imp); got != want {
			t.Errorf("internal/testobj importing %s: allowed %v, want %v", imp, got, want)
		}
	}
}

// The tests' object builders are for tests: no other code imports them, and they
// import only the API types, so any package's tests may use them.
func TestTestObjIsForTestsOnly(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "out" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		own := filepath.ToSlash(filepath.Dir(p)) == "../../internal/testobj"
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case own && !testobjImportAllowed(ip):
				t.Errorf("%s imports %s: internal/testobj imports only the API types", p, ip)
			case !own && ip == testobj:
				t.Errorf("%s imports %s, which is for tests only", p, ip)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: the module moved?", checked)
	}
}
