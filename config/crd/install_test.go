package crd_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/internal/localcluster"
)

// installRounds is how many times the CRDs are created in an API server
// without them, each followed at once by a new client using every kind: the
// race the sandbox lost in CI ("no matches for kind SimNodeClass").
const installRounds = 20

// TestKindsUsableRightAfterInstall is the sandbox's order of events: install the
// CRDs, make a client, create objects of them. Discovery lists a CRD's kind a
// few milliseconds to (under load) seconds after its Established condition, so
// each round creates the CRDs as any installer does (kubectl, helm) and asks
// WaitDiscoverable at once, without waiting for Established first: a wait that
// returned early fails here every round, not once in many CI runs. The last
// round goes through Install itself, as the sandbox and the test suites do.
// Each round starts from an API server where the CRDs' groups are gone, so its
// discovery has to catch up anew.
func TestKindsUsableRightAfterInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	crds, err := crd.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	api := ext.ApiextensionsV1().CustomResourceDefinitions()
	httpClient, err := rest.HTTPClientFor(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}

	for round := range installRounds {
		if round == installRounds-1 {
			if err := crd.Install(ctx, cluster.Config); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		} else {
			for _, c := range crds {
				if _, err := api.Create(ctx, c.DeepCopy(), metav1.CreateOptions{}); err != nil {
					t.Fatalf("round %d: creating CRD %s: %v", round, c.Name, err)
				}
			}
			if err := crd.WaitDiscoverable(ctx, cluster.Config, crds, time.Minute); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		// A client as the sandbox makes one: new, knowing nothing yet.
		kube, err := client.New(cluster.Config, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The newest CRD first: its discovery is the least likely to be there.
		for _, c := range slices.Backward(crds) {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion(c.Spec.Group + "/" + c.Spec.Versions[0].Name)
			list.SetKind(c.Spec.Names.ListKind)
			if err := kube.List(ctx, list); err != nil {
				t.Fatalf("round %d: listing %s right after Install: %v", round, c.Spec.Names.Kind, err)
			}
		}
		// The object the CI run failed to create.
		class := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tailor.sh/v1alpha1", "kind": "SimNodeClass",
			"metadata": map[string]any{"name": "default"},
			"spec":     map[string]any{"catalog": "aws-us-east-1"},
		}}
		if err := kube.Create(ctx, class); err != nil {
			t.Fatalf("round %d: creating SimNodeClass right after Install: %v", round, err)
		}

		// Remove every CRD (and with them their groups) for the next round.
		for _, c := range crds {
			if err := api.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range crds {
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := api.Get(ctx, c.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				t.Fatalf("round %d: CRD %s not gone: %v", round, c.Name, err)
			}
		}
		// And gone from discovery, so the next round cannot pass on this one's.
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			mapper, err := apiutil.NewDynamicRESTMapper(cluster.Config, httpClient)
			if err != nil {
				return false, nil
			}
			for _, c := range crds {
				_, err := mapper.RESTMapping(schema.GroupKind{Group: c.Spec.Group, Kind: c.Spec.Names.Kind}, c.Spec.Versions[0].Name)
				if !meta.IsNoMatchError(err) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("round %d: the CRDs stay in discovery after their deletion: %v", round, err)
		}
	}
}
