package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Untolerated returns the first taint among taints whose effect is one of effects
// that the tolerations do not tolerate, or nil.
func Untolerated(tolerations []corev1.Toleration, taints []corev1.Taint, effects ...corev1.TaintEffect) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if !hasEffect(effects, t.Effect) {
			continue
		}
		if !tolerated(tolerations, t) {
			return t
		}
	}
	return nil
}

func hasEffect(effects []corev1.TaintEffect, e corev1.TaintEffect) bool {
	for _, x := range effects {
		if x == e {
			return true
		}
	}
	return false
}

func tolerated(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tolerations {
		if tolerates(&tolerations[i], t) {
			return true
		}
	}
	return false
}

// tolerates follows the Kubernetes rules: an empty key with Exists matches every
// taint, an empty effect matches every effect, Equal (the default) compares values.
func tolerates(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return tol.Value == t.Value
	}
	return false
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}
