// Package console is tailor console: a read-only web page of the live cluster as
// Tailor sees it — each node with its price, room and lifecycle state, the pending
// pods with Tailor's reason per NodePool, a timeline of the events Tailor's
// controllers recorded, and the cluster's price by NodePool and namespace.
//
// The cluster is kept in shared informers (Source); on every change the page's
// model is recomputed from their caches with pkg/inspect (the same prices,
// allocation and explanations as tailor cost and tailor explain) and pushed to the
// page as a Server-Sent Event. The page's assets are embedded; it writes nothing to
// the cluster and reads only what the user's kubeconfig may read.
package console
