// Package charttest renders Tailor's Helm charts with Helm's own Go packages, as
// `helm install` would, and decodes what they make into typed Kubernetes objects for
// the tests beside it. It is a module of its own so that the Helm SDK stays out of
// the main module.
package charttest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Charts is the charts' directory, from this module's.
const Charts = "../../charts"

// Release is a rendered chart.
type Release struct {
	// Objects are typed where the scheme knows the kind (everything but the
	// ServiceMonitor), unstructured otherwise, in the order Helm installs them.
	Objects []client.Object
	Notes   string
}

// Render renders the chart in dir as release name in namespace with values over
// its defaults, with Helm's install action in client-only dry-run mode (as
// `helm template`), and decodes every object strictly: a field the kind does not
// have is an error.
func Render(dir, name, namespace string, values map[string]any) (*Release, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = name, namespace
	rel, err := install.Run(chrt, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", filepath.Base(dir), err)
	}
	decoder, err := newDecoder()
	if err != nil {
		return nil, err
	}
	manifests := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(manifests))
	for k := range manifests {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	out := &Release{Notes: rel.Info.Notes}
	for _, k := range keys {
		doc := manifests[k]
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, err := decoder(doc)
		if err != nil {
			return nil, fmt.Errorf("chart %s, %s: %w\n%s", filepath.Base(dir), k, err, doc)
		}
		out.Objects = append(out.Objects, obj)
	}
	return out, nil
}

// Values reads a values document.
func Values(doc string) (map[string]any, error) {
	v, err := chartutil.ReadValues([]byte(doc))
	return v, err
}

func stripComments(doc string) string {
	var b bytes.Buffer
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func newDecoder() (func(string) (client.Object, error), error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	strict := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	return func(doc string) (client.Object, error) {
		obj, _, err := strict.Decode([]byte(doc), nil, nil)
		if runtime.IsNotRegisteredError(err) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, err
			}
			return u, nil
		}
		if err != nil {
			return nil, err
		}
		co, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T is not an object", obj)
		}
		return co, nil
	}, nil
}
