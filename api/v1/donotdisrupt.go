package v1

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DoNotDisrupt is what a pod's karpenter.sh/do-not-disrupt annotation says at one
// moment.
//
// +kubebuilder:object:generate=false
type DoNotDisrupt struct {
	// Active: voluntary disruption may not evict the pod now.
	Active bool
	// Until is when the protection of a duration value ends: the pod's start time
	// plus the duration. Zero for "true", for no annotation, for an invalid value
	// and for a pod that has not started.
	Until time.Time
	// Invalid says why the value is neither "true" nor a positive duration. Such a
	// value protects nothing.
	Invalid string
}

// PodDoNotDisrupt reads a pod's karpenter.sh/do-not-disrupt annotation at now, as
// Karpenter does: "true" protects the pod; a positive duration ("30m", "1h30m")
// protects it for that long after it started (status.startTime), and for good
// while it has not started; any other value is ignored. A pod that is terminating
// or finished is on its way out and is not protected either.
func PodDoNotDisrupt(p *corev1.Pod, now time.Time) DoNotDisrupt {
	value, ok := p.Annotations[DoNotDisruptAnnotationKey]
	if !ok || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return DoNotDisrupt{}
	}
	if value == "true" {
		return DoNotDisrupt{Active: true}
	}
	d, err := time.ParseDuration(value)
	switch {
	case err != nil:
		return DoNotDisrupt{Invalid: fmt.Sprintf("%q is neither \"true\" nor a duration", value)}
	case d <= 0:
		return DoNotDisrupt{Invalid: fmt.Sprintf("duration %q is not positive", value)}
	case p.Status.StartTime == nil:
		return DoNotDisrupt{Active: true}
	}
	until := p.Status.StartTime.Add(d)
	return DoNotDisrupt{Active: now.Before(until), Until: until}
}
