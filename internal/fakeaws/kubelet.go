package fakeaws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstanceAnnotation marks the Nodes a Kubelet registered with their instance ID,
// so that it removes only its own.
const InstanceAnnotation = "fakeaws.nodetailor.io/instance"

// KubeletOptions configure a Kubelet.
type KubeletOptions struct {
	// RegistrationDelay is how long after an instance runs its kubelet registers.
	RegistrationDelay time.Duration
	// Annotations go on every Node; by default kwok.x-k8s.io/node=fake, which
	// hands the Node to kwok to keep it Ready and run its pods.
	Annotations map[string]string
	// VMMemoryOverheadPercent is the share of a type's memory the node does not
	// see (DefaultVMMemoryOverheadPercent when zero).
	VMMemoryOverheadPercent float64
	// Referee is the eks-node-referee binary that boots each instance (by default
	// the one in localcluster.BinDir, built by `make tools`).
	Referee string
}

// DefaultVMMemoryOverheadPercent is the share of an instance type's memory a node
// does not see: EKS nodes report 5–8% less than EC2 lists (the hypervisor and the
// kernel's own reservations), Karpenter's documented default is 7.5%.
const DefaultVMMemoryOverheadPercent = 0.075

// Kubelet plays the kubelets of a server's instances against an API server: a
// running instance's kubelet registers its Node (named by the instance's private
// DNS name, providerID aws:///<zone>/<id>, the well-known labels the kubelet and
// the cloud controller manager set), with the labels, taints, capacity and
// allocatable its boot agent and kubelet would give it; a terminated instance's
// Node is deleted, as the cloud node lifecycle controller does.
//
// What the node boots with is not decided here: the eks-node-referee binary
// (hack/eksnode) reads the user data as nodeadm, bootstrap.sh, the Windows
// bootstrap script or Bottlerocket would and checks the kubelet configuration with
// the kubelet's own code, so that nothing Tailor computes is taken on trust. An
// instance whose node would never join never registers; BootError says why.
type Kubelet struct {
	server *Server
	kube   client.Client
	opts   KubeletOptions

	mu sync.Mutex
	// failed holds why an instance's node never joined, by instance ID.
	failed map[string]string
}

// NewKubelet returns the kubelets of s's instances, writing Nodes through kube.
func NewKubelet(s *Server, kube client.Client, opts KubeletOptions) *Kubelet {
	if opts.Annotations == nil {
		opts.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
	}
	if opts.VMMemoryOverheadPercent == 0 {
		opts.VMMemoryOverheadPercent = DefaultVMMemoryOverheadPercent
	}
	return &Kubelet{server: s, kube: kube, opts: opts, failed: map[string]string{}}
}

// Run syncs every interval until ctx ends. Errors are retried at the next tick
// and the last one is returned when ctx ends.
func (k *Kubelet) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		if err := k.Sync(ctx); err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return last
		case <-t.C:
		}
	}
}

// BootError says why the instance's node never joined ("" when it did or has not
// booted yet).
func (k *Kubelet) BootError(instanceID string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failed[instanceID]
}

// bootingInstance is what a kubelet needs of its instance.
type bootingInstance struct {
	inst Instance
	typ  *instanceType
	// due is whether the instance has run long enough to register.
	due bool
	// os is the kubelet's operating system, its image's platform.
	os string
	// request is what the referee is asked about it.
	request refereeNode
	// efa is how many EFA interfaces it launched with.
	efa int64
}

// Sync registers the Nodes of instances due to register and deletes those of
// terminated ones.
func (k *Kubelet) Sync(ctx context.Context) error {
	s := k.server
	s.mu.Lock()
	s.settleLocked()
	now := s.now()
	order := append([]string(nil), s.ec2.order...)
	cluster := s.inv.cluster
	byID := map[string]bootingInstance{}
	for _, id := range order {
		i := s.ec2.instances[id]
		b := bootingInstance{inst: s.snapshotLocked(i), typ: s.inv.types[i.Type], os: "linux",
			due: i.State == stateRunning && !now.Before(i.StateAt.Add(k.opts.RegistrationDelay))}
		var im *Image
		if j := slices.IndexFunc(s.inv.images, func(im *Image) bool { return im.ID == i.ImageID }); j >= 0 {
			im = s.inv.images[j]
		}
		if im != nil && im.Platform == "windows" {
			b.os = "windows"
		}
		if b.due && b.typ != nil {
			b.request = k.requestLocked(i, b.typ, im, cluster)
		}
		if lt := s.ec2.templates[i.TemplateID]; lt != nil {
			for _, ni := range lt.Interfaces {
				if ni.InterfaceType == "efa" || ni.InterfaceType == "efa-only" {
					b.efa++
				}
			}
		}
		byID[id] = b
	}
	s.mu.Unlock()

	nodes := &corev1.NodeList{}
	if err := k.kube.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	registered := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		id, ok := n.Annotations[InstanceAnnotation]
		if !ok {
			continue
		}
		registered[id] = true
		// A shutting-down instance's kubelet stops posting; the Node goes once the
		// instance has terminated or EC2 has forgotten it.
		b, known := byID[id]
		if (!known || b.inst.State == stateTerminated) && n.DeletionTimestamp == nil {
			if err := k.kube.Delete(ctx, n); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting node %s of terminated instance %s: %w", n.Name, id, err)
			}
		}
	}
	var booting []bootingInstance
	k.mu.Lock()
	for _, id := range order {
		b, ok := byID[id]
		if !ok || !b.due || registered[id] || b.typ == nil || k.failed[id] != "" {
			continue
		}
		booting = append(booting, b)
	}
	k.mu.Unlock()
	if len(booting) == 0 {
		return nil
	}
	results, err := k.referee(ctx, booting)
	if err != nil {
		return err
	}
	var errs []string
	for j, b := range booting {
		r := results[j]
		if r.Error != "" {
			// The instance runs, but its node never joins, as on EC2.
			k.mu.Lock()
			k.failed[b.inst.ID] = r.Error
			k.mu.Unlock()
			// What the boot agent would have printed before giving up.
			k.server.SetConsoleOutput(b.inst.ID, fmt.Sprintf("[   12.004113] cloud-init[1021]: Cloud-init v. 22.2.2 running 'modules:final'\n%s: the node's boot failed: %s\n",
				r.Family, r.Error))
			errs = append(errs, fmt.Sprintf("instance %s: its node never joins: %s", b.inst.ID, r.Error))
			continue
		}
		node, err := k.node(b, r, now)
		if err != nil {
			errs = append(errs, fmt.Sprintf("instance %s: %v", b.inst.ID, err))
			continue
		}
		if err := k.kube.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Sprintf("registering node %s of %s: %v", node.Name, b.inst.ID, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// node is the Node the instance's kubelet registers, as the referee answered.
func (k *Kubelet) node(b bootingInstance, r refereeResult, now time.Time) (*corev1.Node, error) {
	t := b.typ
	arch := map[string]string{"x86_64": "amd64", "arm64": "arm64"}[t.Arch]
	capacity, alloc := corev1.ResourceList{}, corev1.ResourceList{}
	for name, v := range r.Capacity {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("the referee's capacity %s=%q: %w", name, v, err)
		}
		capacity[corev1.ResourceName(name)] = q
	}
	for name, v := range r.Allocatable {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("the referee's allocatable %s=%q: %w", name, v, err)
		}
		alloc[corev1.ResourceName(name)] = q
	}
	// What device plugins add (DaemonSets on the nodes with the devices), from the
	// type's EC2 facts: NVIDIA's and AMD's GPU plugins, Habana's for Gaudi, the
	// Neuron plugin (devices and their cores) and the EFA plugin.
	for name, n := range devicePluginResources(t, b.efa) {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		capacity[name], alloc[name] = q, q.DeepCopy()
	}
	if r.NodeIP == "" {
		return nil, fmt.Errorf("the referee named no node IP: bin/eks-node-referee is older than this fake, run `make tools TOOLS=eks-node-referee`")
	}
	var taints []corev1.Taint
	for _, tt := range r.Taints {
		taints = append(taints, corev1.Taint{Key: tt.Key, Value: tt.Value, Effect: corev1.TaintEffect(tt.Effect)})
	}
	name := b.inst.PrivateDNSName
	labels := map[string]string{}
	maps.Copy(labels, r.Labels)
	// What the kubelet and the cloud controller manager set themselves.
	maps.Copy(labels, map[string]string{
		corev1.LabelHostname:                       name,
		corev1.LabelOSStable:                       b.os,
		corev1.LabelArchStable:                     arch,
		"beta.kubernetes.io/os":                    b.os,
		"beta.kubernetes.io/arch":                  arch,
		corev1.LabelInstanceTypeStable:             b.inst.Type,
		"beta.kubernetes.io/instance-type":         b.inst.Type,
		corev1.LabelTopologyZone:                   b.inst.Zone,
		corev1.LabelTopologyRegion:                 k.server.Region(),
		"failure-domain.beta.kubernetes.io/zone":   b.inst.Zone,
		"failure-domain.beta.kubernetes.io/region": k.server.Region(),
	})
	annotations := maps.Clone(k.opts.Annotations)
	annotations[InstanceAnnotation] = b.inst.ID
	at := metav1.NewTime(now)
	condition := func(kind corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: kind, Status: status, Reason: reason, Message: message, LastHeartbeatTime: at, LastTransitionTime: at}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec:       corev1.NodeSpec{ProviderID: b.inst.ProviderID(), Taints: taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: alloc, Phase: corev1.NodeRunning,
			// A kubelet registers with its conditions set; a booted one is ready.
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			// The InternalIP is the kubelet's --node-ip, which the boot agent took
			// from IMDS in the cluster's IP family (the IPv6 address of the primary
			// interface in an IPv6 cluster); the cloud node controller lists it
			// first, and the fake lists no other internal address.
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: r.NodeIP},
				{Type: corev1.NodeHostName, Address: name},
				{Type: corev1.NodeInternalDNS, Address: name},
			},
			NodeInfo: corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: b.os, KubeletVersion: "v" + k.server.Cluster().Version + ".0",
				SystemUUID: b.inst.ID, MachineID: strings.TrimPrefix(b.inst.ID, "i-")},
		},
	}, nil
}

// devicePluginResources are the extended resources the device plugins advertise on
// a node of type t launched with efa EFA interfaces, as each plugin names them.
func devicePluginResources(t *instanceType, efa int64) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	if t.GPUs > 0 {
		out["nvidia.com/gpu"] = int64(t.GPUs)
	}
	switch g := t.GPU; {
	case g.Count == 0:
	case strings.EqualFold(g.Manufacturer, "AMD"):
		out["amd.com/gpu"] = int64(g.Count)
	case strings.EqualFold(g.Manufacturer, "Habana"):
		out["habana.ai/gaudi"] = int64(g.Count)
	}
	if a := t.Accelerator; a.Count > 0 && strings.EqualFold(a.Manufacturer, "AWS") {
		out["aws.amazon.com/neuron"] = int64(a.Count)
		if a.Cores > 0 {
			out["aws.amazon.com/neuroncore"] = int64(a.Count) * int64(a.Cores)
		}
	}
	if efa > 0 {
		out["vpc.amazonaws.com/efa"] = efa
	}
	return out
}
