package operator

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cacheOptions keep the informer cache to what Tailor reads. At thousands of pods
// the cache is most of the controller's memory, and most of a cached pod is what
// the kubelet needs (commands, environment, probes, mounts, images) and the
// bookkeeping of other writers (managedFields).
//
// What stays, because something reads it: all of metadata but managedFields and
// the last-applied annotation (labels, annotations such as do-not-disrupt and
// mirror, owner references, deletion timestamps); a pod's nodeName, scheduling
// fields (nodeSelector, affinity, tolerations, topology spread, priority), every
// container's name, resources, ports and restart policy (requests, sidecars, host
// ports), overhead, pod-level resources, its persistent and ephemeral volume
// sources, its phase and its PodScheduled and Ready conditions; a node's spec, labels, allocatable,
// capacity and conditions. CSINodes (state.Kinds, for the nodes' CSI volume attach
// limits) are one small object per node and are kept whole.
//
// Objects read from this cache are partial: patch them (client.MergeFrom diffs
// only what changed), never Update a Pod or a Node with one.
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: trimMetadata,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: trimPod},
			&corev1.Node{}: {Transform: trimNode},
			// Owners are read for how many pods they want, not how to make them.
			&appsv1.ReplicaSet{}:  {Transform: trimOwner},
			&appsv1.StatefulSet{}: {Transform: trimOwner},
			&batchv1.Job{}:        {Transform: trimOwner},
		},
	}
}

// lastApplied is kubectl apply's copy of the whole object.
const lastApplied = corev1.LastAppliedConfigAnnotation

// trimMetadata drops managedFields and the last-applied annotation. Like every
// transform it may see an object twice (a relist), so it only ever removes.
func trimMetadata(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone, say: store it as it is
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastApplied]; ok {
			delete(a, lastApplied)
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}

func trimPod(obj any) (any, error) {
	if _, err := trimMetadata(obj); err != nil {
		return obj, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	for i := range pod.Spec.InitContainers {
		trimContainer(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		trimContainer(&pod.Spec.Containers[i])
	}
	// Ephemeral containers take no room on a node.
	pod.Spec.EphemeralContainers = nil
	// A new slice: reusing the old array would keep the dropped volumes alive in it.
	var volumes []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			volumes = append(volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim}})
		case v.Ephemeral != nil:
			volumes = append(volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Ephemeral: v.Ephemeral}})
		}
	}
	pod.Spec.Volumes = volumes
	pod.Spec.ImagePullSecrets = nil
	pod.Spec.SecurityContext = nil
	pod.Spec.DNSConfig = nil
	pod.Spec.HostAliases = nil
	pod.Spec.ReadinessGates = nil
	pod.Status.ContainerStatuses = nil
	pod.Status.InitContainerStatuses = nil
	pod.Status.EphemeralContainerStatuses = nil
	pod.Status.PodIPs = nil
	pod.Status.HostIPs = nil
	pod.Status.PodIP, pod.Status.HostIP, pod.Status.QOSClass, pod.Status.StartTime = "", "", "", nil
	pod.Status.ResourceClaimStatuses = nil
	// Only PodScheduled (is the pod unschedulable? when was it bound?) and Ready
	// (when did it start?, for the pod metrics) are read. A new slice: the old
	// array would keep the others alive.
	var conditions []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled || c.Type == corev1.PodReady {
			c.Message = ""
			conditions = append(conditions, c)
		}
	}
	pod.Status.Conditions = conditions
	return pod, nil
}

// trimContainer keeps what places a container: its name, resources, ports and
// restart policy (which makes an init container a sidecar).
func trimContainer(c *corev1.Container) {
	*c = corev1.Container{Name: c.Name, Resources: c.Resources, Ports: c.Ports, RestartPolicy: c.RestartPolicy}
}

func trimNode(obj any) (any, error) {
	if _, err := trimMetadata(obj); err != nil {
		return obj, err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	node.Status.Images = nil
	node.Status.VolumesInUse = nil
	node.Status.VolumesAttached = nil
	return node, nil
}

// trimOwner drops a ReplicaSet's, StatefulSet's or Job's pod template (and a
// StatefulSet's claim templates): the provisioner reads only how many pods it wants
// (see provisioning.OwnerKinds).
func trimOwner(obj any) (any, error) {
	if _, err := trimMetadata(obj); err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
	case *appsv1.StatefulSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
		o.Spec.VolumeClaimTemplates = nil
	case *batchv1.Job:
		o.Spec.Template = corev1.PodTemplateSpec{}
	}
	return obj, nil
}
