package charttest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/localcluster"
)

// Helm's ownership metadata: an existing object is adopted by a release whose name
// and namespace these name, and whose label says Helm manages it.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
	managedBy            = "app.kubernetes.io/managed-by"
)

// TestCRDTakeover follows docs/install.md ("CRDs installed otherwise") with Helm's
// own install and upgrade actions on a real API server. The three CRDs Karpenter
// shares with Tailor were created without Helm (kubectl apply, a GitOps tool, a
// chart's crds/ folder), and a NodePool is stored in them: `helm install
// tailor-crd` fails, naming a CRD that exists and cannot be imported; after the
// label and annotations the page gives, it installs; `helm upgrade` then upgrades
// the CRDs. The same from scratch with --take-ownership (Helm 3.17 or later)
// instead of the label and annotations. The NodePool outlives it all.
func TestCRDTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: binDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	kube := newClient(t, cluster.Config)
	mustCreate(t, kube, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})

	// The CRDs installed otherwise: the three of Karpenter's API, as the chart has
	// them, without Helm's metadata; the chart's two sim CRDs do not exist yet.
	rendered, err := Render(crdChart, "tailor-crd", namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	shared := []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"}
	var otherwise []client.Object
	for _, name := range shared {
		crd := find[*apiextensionsv1.CustomResourceDefinition](rendered, name)
		if crd == nil {
			t.Fatalf("the tailor-crd chart has no CRD %s", name)
		}
		otherwise = append(otherwise, crd)
		mustCreate(t, kube, crd.DeepCopy())
	}
	waitEstablished(ctx, t, kube, cluster.Config, otherwise)
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	mustCreate(t, kube, np)

	chrt, err := loader.Load(crdChart)
	if err != nil {
		t.Fatal(err)
	}
	helm := helmConfig(t, cluster.Kubeconfig)
	install := func(takeOwnership bool) (*release.Release, error) {
		in := action.NewInstall(helm)
		in.ReleaseName, in.Namespace, in.TakeOwnership = "tailor-crd", namespace, takeOwnership
		return in.RunWithContext(ctx, chrt, nil)
	}
	refused := func(t *testing.T) {
		t.Helper()
		_, err := install(false)
		if err == nil || !strings.Contains(err.Error(), "exists and cannot be imported into the current release: invalid ownership metadata") {
			t.Fatalf("helm install tailor-crd over CRDs installed otherwise: error %v, want Helm's refusal to import them", err)
		}
	}
	installed := func(t *testing.T, rel *release.Release, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("helm install tailor-crd: %v", err)
		}
		if rel.Info.Status != release.StatusDeployed {
			t.Fatalf("release %s: %s", rel.Name, rel.Info.Status)
		}
		checkOwned(t, kube, rendered)
		got := &v1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(np), got); err != nil || got.UID != np.UID {
			t.Fatalf("NodePool %s after the takeover: %v (UID %s, was %s)", np.Name, err, got.UID, np.UID)
		}
	}

	t.Run("label and annotations", func(t *testing.T) {
		refused(t)
		for _, name := range shared {
			patchMetadata(t, kube, name, map[string]any{managedBy: "Helm"}, map[string]any{helmReleaseName: "tailor-crd", helmReleaseNamespace: namespace})
		}
		rel, err := install(false)
		installed(t, rel, err)
		up := action.NewUpgrade(helm)
		up.Namespace = namespace
		if rel, err := up.RunWithContext(ctx, "tailor-crd", chrt, nil); err != nil || rel.Info.Status != release.StatusDeployed {
			t.Fatalf("helm upgrade tailor-crd: %v", err)
		}
		checkOwned(t, kube, rendered)
	})

	t.Run("take-ownership", func(t *testing.T) {
		// Back to CRDs installed otherwise: Helm forgets its release (its
		// records, Secrets in the release's namespace) and the CRDs lose Helm's
		// metadata; nothing is deleted.
		if err := kube.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": "tailor-crd"}); err != nil {
			t.Fatal(err)
		}
		for _, obj := range rendered.Objects {
			patchMetadata(t, kube, obj.GetName(), map[string]any{managedBy: nil}, map[string]any{helmReleaseName: nil, helmReleaseNamespace: nil})
		}
		refused(t)
		rel, err := install(true)
		installed(t, rel, err)
	})
}

// helmConfig is Helm's action configuration for the release's namespace on the
// cluster of kubeconfig, with its records in Secrets, as the helm command's is.
func helmConfig(t *testing.T, kubeconfig string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	ns, cacheDir := namespace, t.TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kubeconfig, &ns, &cacheDir
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// patchMetadata merges labels and annotations into a CRD's (a nil value removes
// the key), as kubectl label and kubectl annotate do.
func patchMetadata(t *testing.T, kube client.Client, crd string, labels, annotations map[string]any) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	obj := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd}}
	if err := kube.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("patching CRD %s: %v", crd, err)
	}
}

// checkOwned: every CRD of the chart exists, owned by the release tailor-crd.
func checkOwned(t *testing.T, kube client.Client, rendered *Release) {
	t.Helper()
	for _, obj := range rendered.Objects {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := kube.Get(t.Context(), client.ObjectKeyFromObject(obj), crd); err != nil {
			t.Errorf("CRD %s: %v", obj.GetName(), err)
			continue
		}
		if crd.Labels[managedBy] != "Helm" || crd.Annotations[helmReleaseName] != "tailor-crd" || crd.Annotations[helmReleaseNamespace] != namespace {
			t.Errorf("CRD %s: labels %v, annotations %v; want it the release tailor-crd's", crd.Name, crd.Labels, crd.Annotations)
		}
	}
}
