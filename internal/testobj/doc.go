// Package testobj builds the API objects tests work with — pods, nodes, NodePools,
// NodeClaims and Deployments — from a few arguments and functional options, so a
// test says what matters about an object and no more. It is imported only by
// tests, and stays free of clients and of the engine: it depends on the API types
// alone.
//
// An option is a plain func of the object, so a test may pass its own literal
// where no option fits. Options apply in order; those that take key/value pairs
// merge them into what is there. An empty quantity ("") is not requested.
package testobj

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
)

// Image is the container image of the pods built here: a pause container, which
// the local control plane's kwok nodes never pull anyway.
const Image = "registry.k8s.io/pause:3.10"

// SimClass is a reference to the SimNodeClass name, the NodeClass of the
// simulated provider.
func SimClass(name string) *v1.NodeClassReference {
	return &v1.NodeClassReference{Group: v1alpha1.Group, Kind: "SimNodeClass", Name: name}
}

// resources is the list of cpu and memory, leaving out the empty ones.
func resources(cpu, memory string) corev1.ResourceList {
	out := corev1.ResourceList{}
	if cpu != "" {
		out[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		out[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return out
}

// merge adds the key/value pairs kv to m, making m if it is nil.
func merge(m map[string]string, kv []string) map[string]string {
	if len(kv)%2 != 0 {
		panic(fmt.Sprintf("testobj: key/value pairs %q are not pairs", kv))
	}
	if m == nil {
		m = make(map[string]string, len(kv)/2)
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
