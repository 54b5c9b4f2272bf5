// Package crd embeds the generated CustomResourceDefinitions and installs them.
package crd

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// CRDs returns the embedded CustomResourceDefinitions.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// Install creates or updates the CRDs and waits until the API server serves them
// and lists them in its discovery, so a client made right after can use them.
func Install(ctx context.Context, cfg *rest.Config) error {
	crds, err := CRDs()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
		}
	}
	return WaitDiscoverable(ctx, cfg, crds, 30*time.Second)
}

// WaitDiscoverable waits until a new client's REST mapper finds every served
// version of each CRD's kind. Established only says the API server serves the
// resource: its discovery (the aggregator's group list, the group's resource
// lists) catches up a little later, and a client made in between fails with
// "no matches for kind".
func WaitDiscoverable(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition, timeout time.Duration) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	var missing error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		// A fresh mapper each time: a mapper caches what it was told.
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
		if err != nil {
			missing = err
			return false, nil
		}
		missing = undiscovered(mapper, crds)
		return missing == nil, nil
	})
	if err != nil {
		if missing != nil {
			return fmt.Errorf("waiting for the API server's discovery to list the CRDs: %w", missing)
		}
		return err
	}
	return nil
}

// undiscovered names the first served CRD version the mapper cannot map.
func undiscovered(mapper meta.RESTMapper, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if _, err := mapper.RESTMapping(gk, v.Name); err != nil {
				return fmt.Errorf("CRD %s version %s: %w", crd.Name, v.Name, err)
			}
		}
	}
	return nil
}
