// Package nodeclaim holds what the controllers share about NodeClaims: building a
// claim for a planned node, finding a claim's Node and a Node's claims through the
// provider ID indexes of the cache, reading one's own writes, and the reasons a
// claim is given up. It is the one package under pkg/controllers the controllers
// may import (internal/archtest).
package nodeclaim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Reasons a claim is given up, set by the lifecycle controller on the condition that
// did not come true before the claim is deleted; the NodePool's
// NodeRegistrationHealthy condition reads them.
const (
	ReasonRegistrationTimedOut   = "RegistrationTimedOut"
	ReasonInitializationTimedOut = "InitializationTimedOut"
)

// ProviderIDIndex indexes Nodes and NodeClaims by provider ID in the cache.
const ProviderIDIndex = "providerID"

// IndexProviderIDs registers the provider ID indexes with mgr's cache.
func IndexProviderIDs(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Node{}, ProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Node).Spec.ProviderID}
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &v1.NodeClaim{}, ProviderIDIndex, func(o client.Object) []string {
		return []string{o.(*v1.NodeClaim).Status.ProviderID}
	})
}

// NodeOf returns the Node of a launched claim, or nil if none registered yet.
func NodeOf(ctx context.Context, kube client.Reader, nc *v1.NodeClaim) (*corev1.Node, error) {
	if nc.Status.ProviderID == "" {
		return nil, nil
	}
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx, nodes, client.MatchingFields{ProviderIDIndex: nc.Status.ProviderID}); err != nil {
		return nil, err
	}
	if len(nodes.Items) == 0 {
		return nil, nil
	}
	return &nodes.Items[0], nil
}

// ClaimsOfNode maps a Node to reconcile requests for its claims (for Watches).
func ClaimsOfNode(kube client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		node := o.(*corev1.Node)
		claims := &v1.NodeClaimList{}
		if node.Spec.ProviderID == "" || kube.List(ctx, claims, client.MatchingFields{ProviderIDIndex: node.Spec.ProviderID}) != nil {
			return nil
		}
		var out []reconcile.Request
		for _, nc := range claims.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nc)})
		}
		return out
	}
}
