package scheduling

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// A node attaches only so many volumes of a CSI driver: its CSINode's allocatable
// count, or for a new node its instance type's limit. The kube-scheduler's
// NodeVolumeLimits filter refuses a node where a pod's new volumes would exceed it;
// so does the solve. A volume counts once per node however many pods use it.
//
// Not modelled: in-tree volumes migrated to CSI, inline CSI volumes, and
// VolumeAttachments of volumes no pod on the node uses any more.

// attachment is one volume a pod attaches through a CSI driver.
type attachment struct {
	driver string
	id     string // driver/handle, or driver/namespace/claim while unbound
}

// volumeLimitsOf reads the allocatable counts of a CSINode.
func volumeLimitsOf(csiNode *storagev1.CSINode) map[string]int64 {
	var out map[string]int64
	for _, d := range csiNode.Spec.Drivers {
		if d.Allocatable != nil && d.Allocatable.Count != nil {
			if out == nil {
				out = map[string]int64{}
			}
			out[d.Name] = int64(*d.Allocatable.Count)
		}
	}
	return out
}

// attachments lists the pod's volumes that a CSI driver attaches, as the
// kube-scheduler's NodeVolumeLimits counts them: a bound claim by its volume's
// driver and handle; an unbound one (or one whose volume is not found) by its
// StorageClass's provisioner. Volumes it cannot tell are left out, as there.
func (s *solver) attachments(pod *corev1.Pod) []attachment {
	var out []attachment
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var claimName string
		var template *corev1.PersistentVolumeClaimTemplate
		switch {
		case vol.PersistentVolumeClaim != nil:
			claimName = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			claimName, template = pod.Name+"-"+vol.Name, vol.Ephemeral.VolumeClaimTemplate
		default:
			continue
		}
		var className *string
		pvc := s.pvcs[pod.Namespace+"/"+claimName]
		switch {
		case pvc != nil:
			if pv := s.pvs[pvc.Spec.VolumeName]; pvc.Spec.VolumeName != "" && pv != nil {
				if pv.Spec.CSI != nil && pv.Spec.CSI.Driver != "" && pv.Spec.CSI.VolumeHandle != "" {
					out = append(out, attachment{driver: pv.Spec.CSI.Driver, id: pv.Spec.CSI.Driver + "/" + pv.Spec.CSI.VolumeHandle})
				}
				continue
			}
			className = pvc.Spec.StorageClassName
			if c, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
				className = &c
			}
		case template != nil:
			// Its claim is not made yet: it will be the template's.
			className = template.Spec.StorageClassName
		default:
			continue
		}
		if className == nil || *className == "" {
			continue // an immediate claim is bound before any pod uses it
		}
		sc := s.storageClasses[*className]
		if sc == nil || sc.Provisioner == "" {
			continue
		}
		out = append(out, attachment{driver: sc.Provisioner, id: sc.Provisioner + "/" + pod.Namespace + "/" + claimName})
	}
	slices.SortFunc(out, func(a, b attachment) int { return strings.Compare(a.id, b.id) })
	return slices.CompactFunc(out, func(a, b attachment) bool { return a.id == b.id })
}

// attach records the volumes on the node.
func (n *simNode) attach(vols []attachment) {
	if len(vols) == 0 {
		return
	}
	if n.volumes == nil {
		n.volumes = map[string]string{}
	}
	for _, a := range vols {
		n.volumes[a.id] = a.driver
	}
}

// volumeDemand counts, per driver, the volumes the node would have with the pod's:
// nil when the pod brings none the node does not attach already.
func (n *simNode) volumeDemand(vols []attachment) map[string]int64 {
	var out map[string]int64
	for _, a := range vols {
		if _, ok := n.volumes[a.id]; ok {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[a.driver]++
	}
	if out == nil {
		return nil
	}
	for _, d := range n.volumes {
		if _, ok := out[d]; ok {
			out[d]++
		}
	}
	return out
}

// volumesExceed names a driver whose limit the demand exceeds, with the limit.
func volumesExceed(limits map[string]int64, demand map[string]int64) (string, int64, bool) {
	if len(limits) == 0 {
		return "", 0, false
	}
	for _, d := range slices.Sorted(maps.Keys(demand)) {
		if limit, ok := limits[d]; ok && demand[d] > limit {
			return d, limit, true
		}
	}
	return "", 0, false
}

// typeVolumesExceed is volumesExceed for an instance type's limits.
func typeVolumesExceed(t *typeInfo, demand map[string]int64) bool {
	for d, count := range demand {
		if limit, ok := t.it.VolumeLimits[d]; ok && count > int64(limit) {
			return true
		}
	}
	return false
}

func volumeReason(driver string, limit int64) string {
	return fmt.Sprintf("node attaches at most %d volumes of CSI driver %s", limit, driver)
}
