package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetailor/tailor/internal/localcluster"
)

// SystemNode names the Node `up --system-node` adds: a small untainted node that
// Tailor does not manage (no NodePool's, no NodeClaim's), where system workloads
// such as the tailor chart's controller can run, as on a managed node group.
const SystemNode = "system"

// SystemNodeRole is the label the system node carries, as node-role labels name a
// node's role; select it with nodeSelector.
const SystemNodeRole = "node-role.kubernetes.io/system"

// systemNodeZone is a zone both clouds of the sandbox sell: the zone spreads of a
// chart's pods find the node in a domain.
const systemNodeZone = "us-east-1a"

// systemNode is the Node of the system node: room for a controller of 500m and
// 512Mi (the chart's requests) beside the sandbox's DaemonSets, none for the
// demo's pods of 1 cpu, which stay Tailor's to place.
func systemNode() *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: SystemNode,
		Annotations: map[string]string{localcluster.KwokNodeAnnotation: "fake"},
		Labels: map[string]string{SystemNodeRole: "", corev1.LabelHostname: SystemNode,
			corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
			corev1.LabelTopologyZone: systemNodeZone, corev1.LabelTopologyRegion: "us-east-1"}}}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	return node
}

// addSystemNode creates the system node, which kwok (logging in dir) then plays,
// and waits until it is Ready.
func addSystemNode(ctx context.Context, cfg *rest.Config, dir string) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx, systemNode(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the system node: %w", err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		node, err := kube.CoreV1().Nodes().Get(ctx, SystemNode, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s", c.Status)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the system node is not Ready after 30s (%s): see %s", last, filepath.Join(dir, "kwok.log"))
	}
	return nil
}
