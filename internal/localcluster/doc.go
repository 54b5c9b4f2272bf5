// Package localcluster runs a real Kubernetes control plane on this machine from the
// binaries `make tools` builds: etcd and kube-apiserver always, and on request the
// kube-scheduler, the kube-controller-manager and kwok (which plays the kubelet of
// fake nodes). Tests, end-to-end runs and `tailor sandbox` all start it through here.
//
// Every component listens on a free loopback port and writes its log to the
// cluster's directory. The processes are tied to the caller: Stop ends them, and if
// the caller dies first (a panic, a kill), the kernel ends them too.
package localcluster
