package operator

import "strings"

// ServiceAccountNamespaceFile holds the namespace of the pod it is mounted in.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// DefaultLeaderElectionID names the leader Lease unless --leader-election-name does.
const DefaultLeaderElectionID = "tailor-controller"

// LeaseNamespace is where the leader Lease lives when no flag or
// LEADER_ELECTION_NAMESPACE says: the controller's own namespace, as Karpenter's
// chart passes it (SYSTEM_NAMESPACE, or POD_NAMESPACE from the downward API), else
// the service account's namespace file, else kube-system (out of cluster).
func LeaseNamespace(lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) string {
	for _, name := range []string{"SYSTEM_NAMESPACE", "POD_NAMESPACE"} {
		if ns, ok := lookupEnv(name); ok && strings.TrimSpace(ns) != "" {
			return strings.TrimSpace(ns)
		}
	}
	if b, err := readFile(ServiceAccountNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return "kube-system"
}
