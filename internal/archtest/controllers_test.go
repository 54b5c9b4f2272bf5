package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	module      = "github.com/nodetailor/tailor"
	controllers = module + "/pkg/controllers"
	// shared is the one package under pkg/controllers a controller may import:
	// what several controllers need (building a claim, the provider ID index) lives
	// there, so that controllers stay independent and are wired only by the operator.
	shared = controllers + "/nodeclaim"
)

// controllerImportAllowed says whether the package pkg, under pkg/controllers, may
// import imp.
func controllerImportAllowed(pkg, imp string) bool {
	if imp != controllers && !strings.HasPrefix(imp, controllers+"/") {
		return true
	}
	return imp == shared || imp == pkg
}

func TestControllerImportAllowed(t *testing.T) {
	for _, tc := range []struct {
		pkg, imp string
		want     bool
	}{
		{controllers + "/disruption", controllers + "/provisioning", false},
		{controllers + "/nodepool/registrationhealth", controllers + "/nodeclaim/lifecycle", false},
		{controllers + "/nodeclaim/lifecycle", controllers + "/nodeclaim", true},
		{controllers + "/nodeclaim", controllers + "/nodeclaim/lifecycle", false},
		{controllers + "/nodepool", controllers, false},
		{controllers + "/disruption", module + "/pkg/metrics", true},
		{controllers + "/disruption", module + "/pkg/controllersx", true},
	} {
		if got := controllerImportAllowed(tc.pkg, tc.imp); got != tc.want {
			t.Errorf("%s importing %s: allowed %v, want %v", tc.pkg, tc.imp, got, tc.want)
		}
	}
}

// Controllers do not import each other, only the shared package; the operator
// wires them. Tests are exempt: one may drive two controllers to check they agree.
func TestControllersImportNoOtherController(t *testing.T) {
	root := filepath.Join("..", "..", "pkg", "controllers")
	checked := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := path.Join(controllers, filepath.ToSlash(rel))
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			if !controllerImportAllowed(pkg, ip) {
				t.Errorf("%s imports %s: a controller imports no other controller, only %s (move what they share there, or lower)", p, ip, shared)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d files checked: pkg/controllers moved?", checked)
	}
}
