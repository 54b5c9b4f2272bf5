package fakeaws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
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
	// see (allocatable.DefaultVMMemoryOverheadPercent when zero).
	VMMemoryOverheadPercent float64
}

// Kubelet plays the kubelets of a server's instances against an API server: a
// running instance's kubelet registers its Node (named by the instance's private
// DNS name, providerID aws:///<zone>/<id>, well-known labels, the labels, taints
// and kubelet settings of its user data, capacity and allocatable as an EKS node
// has them); a terminated instance's Node is deleted, as the cloud node
// lifecycle controller does.
type Kubelet struct {
	server *Server
	kube   client.Client
	opts   KubeletOptions
}

// NewKubelet returns the kubelets of s's instances, writing Nodes through kube.
func NewKubelet(s *Server, kube client.Client, opts KubeletOptions) *Kubelet {
	if opts.Annotations == nil {
		opts.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
	}
	if opts.VMMemoryOverheadPercent == 0 {
		opts.VMMemoryOverheadPercent = allocatable.DefaultVMMemoryOverheadPercent
	}
	return &Kubelet{server: s, kube: kube, opts: opts}
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

// bootingInstance is what a kubelet needs of its instance.
type bootingInstance struct {
	inst Instance
	typ  *instanceType
	// due is whether the instance has run long enough to register.
	due bool
	// os is the kubelet's operating system, its image's platform.
	os string
}

// Sync registers the Nodes of instances due to register and deletes those of
// terminated ones.
func (k *Kubelet) Sync(ctx context.Context) error {
	s := k.server
	s.mu.Lock()
	s.settleLocked()
	now := s.now()
	order := append([]string(nil), s.ec2.order...)
	byID := map[string]bootingInstance{}
	for _, id := range order {
		i := s.ec2.instances[id]
		b := bootingInstance{inst: s.snapshotLocked(i), typ: s.inv.types[i.Type], os: "linux",
			due: i.State == stateRunning && !now.Before(i.StateAt.Add(k.opts.RegistrationDelay))}
		if j := slices.IndexFunc(s.inv.images, func(im *Image) bool { return im.ID == i.ImageID }); j >= 0 && s.inv.images[j].Platform == "windows" {
			b.os = "windows"
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
	var errs []string
	for _, id := range order {
		b, ok := byID[id]
		if !ok || !b.due || registered[id] || b.typ == nil {
			continue
		}
		node, err := k.node(b, now)
		if err != nil {
			// The instance boots, but its kubelet cannot start: no Node, as on EC2.
			errs = append(errs, fmt.Sprintf("instance %s: %v", id, err))
			continue
		}
		if err := k.kube.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Sprintf("registering node %s of %s: %v", node.Name, id, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// node is the Node the instance's kubelet registers.
func (k *Kubelet) node(b bootingInstance, now time.Time) (*corev1.Node, error) {
	bc, err := parseUserData(b.inst.UserData)
	if err != nil {
		return nil, err
	}
	t := b.typ
	arch := map[string]string{"x86_64": "amd64", "arm64": "arm64"}[t.Arch]
	model := allocatable.EKS{VMMemoryOverheadPercent: k.opts.VMMemoryOverheadPercent, Kubelet: bc.kubelet}
	shape := allocatable.Shape{
		CPU:    *resource.NewQuantity(int64(t.VCPUs), resource.DecimalSI),
		Memory: *resource.NewQuantity(t.MemoryMiB<<20, resource.BinarySI),
		Pods:   int64(t.ENIs)*int64(t.IPv4PerENI-1) + 2,
		Arch:   arch,
	}
	n, err := model.Node(shape)
	if err != nil {
		return nil, err
	}
	capacity := n.Capacity
	alloc := n.Allocatable()
	if t.GPUs > 0 {
		gpus := *resource.NewQuantity(int64(t.GPUs), resource.DecimalSI)
		capacity["nvidia.com/gpu"], alloc["nvidia.com/gpu"] = gpus, gpus.DeepCopy()
	}
	name := b.inst.PrivateDNSName
	labels := map[string]string{}
	maps.Copy(labels, bc.labels)
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
		Spec:       corev1.NodeSpec{ProviderID: b.inst.ProviderID(), Taints: bc.taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: alloc, Phase: corev1.NodeRunning,
			// A kubelet registers with its conditions set; a booted one is ready.
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: b.inst.PrivateIP},
				{Type: corev1.NodeHostName, Address: name},
				{Type: corev1.NodeInternalDNS, Address: name},
			},
			NodeInfo: corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: b.os, KubeletVersion: "v" + k.server.Cluster().Version + ".0",
				SystemUUID: b.inst.ID, MachineID: strings.TrimPrefix(b.inst.ID, "i-")},
		},
	}, nil
}
