// Stands in for github.com/containerd/containerd v1: nodeadm's go.mod requires v1.7, whose
// api/ packages clash with the kubelet's github.com/containerd/containerd/api; the
// referee builds only nodeadm's api packages, which import neither.
module github.com/containerd/containerd

go 1.21
