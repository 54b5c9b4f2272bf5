package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Event reasons about a pod's karpenter.sh/do-not-disrupt annotation, Karpenter's.
const (
	ReasonInvalidDoNotDisrupt        = "InvalidDoNotDisruptAnnotation"
	ReasonDoNotDisruptUntil          = "DoNotDisruptUntil"
	ReasonDoNotDisruptPeriodElapsed  = "DoNotDisruptGracePeriodElapsed"
	doNotDisruptElapsedMessage       = "The " + v1.DoNotDisruptAnnotationKey + " grace period has elapsed, pod is now disruptable"
	doNotDisruptUntilMessageFormat   = "The " + v1.DoNotDisruptAnnotationKey + " grace period will elapse at %s"
	doNotDisruptInvalidMessageFormat = "Invalid " + v1.DoNotDisruptAnnotationKey + " annotation: %s, ignoring annotation"
)

// podEvent is one event about a pod.
type podEvent struct {
	pod                        *corev1.Pod
	eventtype, reason, message string
}

// doNotDisruptEvents are the events the do-not-disrupt annotations of the pods on
// Tailor's nodes call for at now, each said once: an invalid value (ignored), when a
// duration's protection ends, and that it has ended. said remembers, by pod, what
// was said last; pods no longer on those nodes are forgotten.
func doNotDisruptEvents(nodes []*scheduling.Node, now time.Time, said map[types.UID]string) []podEvent {
	var out []podEvent
	seen := map[types.UID]bool{}
	for _, n := range nodes {
		if n.Node == nil || n.Node.Labels[v1.NodePoolLabelKey] == "" {
			continue
		}
		for _, p := range n.Pods {
			value, ok := p.Annotations[v1.DoNotDisruptAnnotationKey]
			if !ok || value == "true" {
				continue
			}
			seen[p.UID] = true
			dnd := v1.PodDoNotDisrupt(p, now)
			var e podEvent
			switch {
			case dnd.Invalid != "":
				e = podEvent{p, corev1.EventTypeWarning, ReasonInvalidDoNotDisrupt, fmt.Sprintf(doNotDisruptInvalidMessageFormat, dnd.Invalid)}
			case dnd.Until.IsZero():
				continue // not started (or terminating): nothing to say yet
			case dnd.Active:
				e = podEvent{p, corev1.EventTypeNormal, ReasonDoNotDisruptUntil, fmt.Sprintf(doNotDisruptUntilMessageFormat, dnd.Until.UTC().Format(time.RFC3339))}
			default:
				e = podEvent{p, corev1.EventTypeNormal, ReasonDoNotDisruptPeriodElapsed, doNotDisruptElapsedMessage}
			}
			key := e.reason + "\x00" + e.message
			if said[p.UID] == key {
				continue
			}
			said[p.UID] = key
			out = append(out, e)
		}
	}
	for uid := range said {
		if !seen[uid] {
			delete(said, uid)
		}
	}
	return out
}
