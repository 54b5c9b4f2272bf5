package fidelity

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // registers core's defaulting and conversions
	"k8s.io/kubernetes/pkg/apis/core/validation"
)

// validate runs the API server's defaulting and validation on every object of the
// case, so that neither the generator nor the shrinker tests behaviour on objects
// a cluster could not hold.
func validate(c *testCase) error {
	var errs []error
	for _, ns := range c.namespaces {
		var in core.Namespace
		if err := convert(ns.DeepCopy(), &in); err != nil {
			return err
		}
		if e := validation.ValidateNamespace(&in); len(e) > 0 {
			errs = append(errs, fmt.Errorf("namespace %s: %v", ns.Name, e.ToAggregate()))
		}
	}
	for _, n := range c.nodes {
		var node core.Node
		if err := convert(n.Node.DeepCopy(), &node); err != nil {
			return err
		}
		if e := validation.ValidateNode(&node); len(e) > 0 {
			errs = append(errs, fmt.Errorf("node %s: %v", n.Node.Name, e.ToAggregate()))
		}
		for _, p := range n.Pods {
			errs = append(errs, validatePod(p))
		}
	}
	errs = append(errs, validatePod(c.pod))
	return errors.Join(errs...)
}

func validatePod(p *corev1.Pod) error {
	v1pod := p.DeepCopy()
	// Deletion is not part of creating a pod.
	v1pod.DeletionTimestamp, v1pod.DeletionGracePeriodSeconds = nil, nil
	var pod core.Pod
	if err := convert(v1pod, &pod); err != nil {
		return err
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&pod.Spec, nil, &pod.ObjectMeta, nil)
	if e := validation.ValidatePodCreate(&pod, opts); len(e) > 0 {
		return fmt.Errorf("pod %s/%s: %v", p.Namespace, p.Name, e.ToAggregate())
	}
	return nil
}

// convert defaults a v1 object as the API server would and converts it to the
// internal type validation works on.
func convert(obj runtime.Object, out any) error {
	legacyscheme.Scheme.Default(obj)
	return legacyscheme.Scheme.Convert(obj, out, nil)
}

// TestGeneratorIsValid checks that the generator makes only objects the API server
// accepts.
func TestGeneratorIsValid(t *testing.T) {
	n := min(*flagCases, 500)
	for i := range n {
		if err := validate(generate(*flagSeed, i)); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
	}
}
