package operator

// RBAC: the leader Lease lives in the controller's own namespace (the chart turns
// this namespace into the release's), and events go to each object's namespace.
// Namespace-scoped rules here become the chart's Role; see `make generate`.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=tailor
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
