package charttest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/fakeaws"
)

// awsCluster is the fake AWS's EKS cluster: the chart's settings.clusterName, the
// tag its subnets and security groups are discovered by, and the name of its
// interruption queue.
const awsCluster = "chart-e2e"

// awsValues run the aws provider against the fake AWS at url: the SDK's standard
// variables, given through the chart's controller.env, name its endpoint, region
// and credentials, and nothing of the machine's own AWS configuration is read
// (startController gives the binary a HOME of its own as well).
func awsValues(url, region string) string {
	return fmt.Sprintf(`
cloudProvider: aws
logLevel: debug
settings:
  clusterName: %[1]s
  interruptionQueue: %[1]s
  batchIdleDuration: 500ms
  batchMaxDuration: 5s
  kubeClientQPS: 100
  kubeClientBurst: 200
controller:
  env:
    - {name: AWS_ENDPOINT_URL, value: %[2]q}
    - {name: AWS_REGION, value: %[3]q}
    - {name: AWS_ACCESS_KEY_ID, value: AKIAFAKECHARTTEST}
    - {name: AWS_SECRET_ACCESS_KEY, value: fakeaws-chart-test}
    - {name: AWS_EC2_METADATA_DISABLED, value: "true"}
    - {name: AWS_CONFIG_FILE, value: /dev/null}
    - {name: AWS_SHARED_CREDENTIALS_FILE, value: /dev/null}
`, awsCluster, url, region)
}

// olderAL2023 is an AL2023 release the fake publishes before its latest: pinning
// the EC2NodeClass's alias to it drifts the nodes launched with the latest.
const olderAL2023 = "v20250715"

// TestInstallAWS is TestInstall with cloudProvider: aws, so with the aws
// provider's RBAC only (charts/tailor/rbac/aws), against the fake AWS of
// internal/fakeaws served in this process, whose kubelets register the Nodes of
// its instances: the controller, as the chart's ServiceAccount, resolves an
// EC2NodeClass, launches an instance for a pending pod, replaces it when the
// EC2NodeClass's AMI changes (drift: a replacement launched, the old node tainted
// and drained through the Eviction API, its NodeClaim and instance gone), and
// removes the replacement once it is empty (emptiness consolidation), with no
// request refused.
func TestInstallAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	bin := make(chan buildResult, 1)
	go func() { bin <- buildTailor(t.TempDir()) }()

	cluster, kube := startCluster(ctx, t)
	fake := startFakeAWS(t, kube, cluster.Config)
	in := install(ctx, t, kube, cluster.Config, awsValues(fake.URL(), fake.Region()))
	checkAWSRules(t, in.rel)

	built := <-bin
	if built.err != nil {
		t.Fatal(built.err)
	}
	ctrl := startController(ctx, t, built.path, in.dep, in.kubeconfig)
	defer ctrl.stop(t)
	ctrl.waitReady(ctx, t)

	// The EC2NodeClass is resolved (its status patched) as the ServiceAccount.
	discovered := map[string]string{"karpenter.sh/discovery": awsCluster}
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovered}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovered}},
		Role:                       "KarpenterNodeRole-" + awsCluster,
	}}
	mustCreate(t, kube, nc)
	eventually(ctx, t, ctrl, "the EC2NodeClass ready", func(ctx context.Context) (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			return false, err.Error()
		}
		return nc.IsReady(), fmt.Sprintf("conditions %v", nc.Status.Conditions)
	})

	// Provisioning: a pending pod gets an instance launched for it, whose Node
	// the controller registers (labels, the unregistered taint off).
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
		{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
	}
	np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("Never")
	mustCreate(t, kube, np)
	// A Deployment's pod, so that it comes back after its eviction.
	labels := map[string]string{"app": "inflate"}
	replicas, grace := int32(1), int64(0)
	inflate := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}}
	mustCreate(t, kube, inflate)
	// The first launch reads and builds EC2's catalog, which under the race
	// detector on a loaded machine takes a while.
	first := waitAWSNode(ctx, t, ctrl, kube, fake, "the pod running on an instance Tailor launched", 3*time.Minute, labels, "")

	// Drift: the EC2NodeClass pinned to an older AMI release; the node is replaced
	// by one of that release, its pod evicted to it.
	older := imagesOfRelease(fake, olderAL2023)
	if len(older) == 0 {
		t.Fatalf("the fake has no AL2023 image of release %s", olderAL2023)
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"amiSelectorTerms":[{"alias":"al2023@%s"}]}}`, olderAL2023))
	if err := kube.Patch(ctx, nc, patch); err != nil {
		t.Fatal(err)
	}
	second := waitAWSNode(ctx, t, ctrl, kube, fake, "the drifted node replaced", 2*time.Minute, labels, first.node)
	if !slices.Contains(older, second.imageID) {
		t.Errorf("the replacement %s runs image %s, not one of release %s (%v)", second.instanceID, second.imageID, olderAL2023, older)
	}
	waitAWSGone(ctx, t, ctrl, kube, fake, "the drifted node, its NodeClaim and instance gone", first)

	// Emptiness: the pod goes, and with consolidateAfter 0s the empty node is
	// removed.
	if err := kube.Delete(ctx, inflate); err != nil {
		t.Fatal(err)
	}
	if err := kube.Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"disruption":{"consolidateAfter":"0s"}}}`))); err != nil {
		t.Fatal(err)
	}
	waitAWSGone(ctx, t, ctrl, kube, fake, "the empty node, its NodeClaim and instance gone", second)

	ctrl.stop(t)
	ctrl.checkNotRefused(t)
	for _, i := range fake.Instances() {
		if i.State != "terminated" && i.State != "shutting-down" {
			t.Errorf("instance %s (NodeClaim %s) is %s at the end", i.ID, i.Tags["karpenter.sh/nodeclaim"], i.State)
		}
	}
	checkRefusedAWS(ctx, t, in.saConfig)
}

// startFakeAWS serves the fake AWS account of a local cluster (its EKS cluster's
// endpoint and CA the API server's) until the test ends, and plays the kubelets
// of its instances, registering their Nodes (which kwok then keeps Ready) as
// cluster admin.
func startFakeAWS(t *testing.T, kube client.Client, admin *rest.Config) *fakeaws.Server {
	t.Helper()
	opts := fakeaws.LocalClusterOptions(awsCluster, serverVersion(t, admin), admin.Host, admin.CAData)
	// EC2 takes about a minute to terminate; the test would wait for each.
	opts.TerminationDelay = 100 * time.Millisecond
	fake, err := fakeaws.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// The controller calls the fake with the SDK's own HTTP client, which on
	// loopback can lose a race with an instant answer (see fakeaws.AWSConfig);
	// AWS answers in milliseconds, and so does the fake (as the sandbox's).
	for _, svc := range []string{"ec2", "iam", "sqs", "ssm", "pricing", "eks"} {
		fake.SetLatency(svc+":*", 5*time.Millisecond)
	}
	if _, err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	kubelets := make(chan struct{})
	go func() {
		defer close(kubelets)
		_ = fakeaws.NewKubelet(fake, kube, fakeaws.KubeletOptions{}).Run(ctx, 250*time.Millisecond)
	}()
	t.Cleanup(func() {
		stop()
		<-kubelets
		_ = fake.Close()
	})
	return fake
}

// serverVersion is the API server's major.minor, which the controller reads to
// pick the AMIs of an alias; the fake publishes its AMIs for it.
func serverVersion(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.Major + "." + strings.TrimRight(v.Minor, "+")
}

// checkAWSRules: the release's ClusterRole has the aws provider's rules and none
// of the sim's, so what runs below runs with the aws RBAC alone.
func checkAWSRules(t *testing.T, rel *Release) {
	t.Helper()
	cr := only[*rbacv1.ClusterRole](t, rel)
	grants := func(group, resource string) bool {
		return slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource)
		})
	}
	if !grants(awsv1.Group, "ec2nodeclasses") || !grants(awsv1.Group, "ec2nodeclasses/status") {
		t.Errorf("ClusterRole %s does not grant the aws provider's ec2nodeclasses rules: %v", cr.Name, cr.Rules)
	}
	if slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.APIGroups, v1alpha1.Group) }) {
		t.Errorf("ClusterRole %s of cloudProvider aws grants the sim provider's %s rules: %v", cr.Name, v1alpha1.Group, cr.Rules)
	}
}

// awsNode is a node of an instance of the fake, and its NodeClaim.
type awsNode struct {
	node, claim, instanceID, imageID string
}

// waitAWSNode waits for the pod of the Deployment with labels to run on an
// initialized node of the NodePool other than not, whose provider ID is an
// instance of the fake, running.
func waitAWSNode(ctx context.Context, t *testing.T, ctrl *controller, kube client.Client, fake *fakeaws.Server, what string, within time.Duration, labels map[string]string, not string) awsNode {
	t.Helper()
	var got awsNode
	eventuallyWithin(ctx, t, ctrl, what, within, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := kube.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool {
			return p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != not && p.Status.Phase == corev1.PodRunning
		})
		if i < 0 {
			var state []string
			for _, p := range pods.Items {
				state = append(state, fmt.Sprintf("%s on %q, %s", p.Name, p.Spec.NodeName, p.Status.Phase))
			}
			return false, fmt.Sprintf("pods %v; nodes: %s", state, nodesState(ctx, kube))
		}
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: pods.Items[i].Spec.NodeName}, node); err != nil {
			return false, err.Error()
		}
		if node.Labels[v1.NodePoolLabelKey] != "default" || node.Labels[v1.NodeInitializedLabelKey] != "true" {
			return false, fmt.Sprintf("node %s labels %v", node.Name, node.Labels)
		}
		id, ok := strings.CutPrefix(node.Spec.ProviderID, "aws:///")
		if !ok {
			return false, fmt.Sprintf("node %s has provider ID %q", node.Name, node.Spec.ProviderID)
		}
		id = id[strings.LastIndex(id, "/")+1:]
		inst, ok := fake.Instance(id)
		if !ok || inst.State != "running" {
			return false, fmt.Sprintf("node %s: instance %s: %q (known %v)", node.Name, id, inst.State, ok)
		}
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims); err != nil {
			return false, err.Error()
		}
		c := slices.IndexFunc(claims.Items, func(nc v1.NodeClaim) bool { return nc.Status.ProviderID == node.Spec.ProviderID })
		if c < 0 {
			return false, "no NodeClaim of provider ID " + node.Spec.ProviderID
		}
		got = awsNode{node: node.Name, claim: claims.Items[c].Name, instanceID: id, imageID: inst.ImageID}
		return true, ""
	})
	return got
}

// waitAWSGone waits for n's Node and NodeClaim to be deleted and its instance
// terminated.
func waitAWSGone(ctx context.Context, t *testing.T, ctrl *controller, kube client.Client, fake *fakeaws.Server, what string, n awsNode) {
	t.Helper()
	eventuallyWithin(ctx, t, ctrl, what, 2*time.Minute, func(ctx context.Context) (bool, string) {
		var left []string
		for _, obj := range []client.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.node}}, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: n.claim}}} {
			if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v, taints %v)", obj, obj.GetName(), err, taintsOf(obj)))
			}
		}
		if inst, ok := fake.Instance(n.instanceID); ok && inst.State != "terminated" {
			left = append(left, "instance "+n.instanceID+" "+inst.State)
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
}

func taintsOf(obj client.Object) []corev1.Taint {
	switch o := obj.(type) {
	case *corev1.Node:
		return o.Spec.Taints
	case *v1.NodeClaim:
		return o.Spec.Taints
	}
	return nil
}

// imagesOfRelease are the fake's AL2023 images of a release.
func imagesOfRelease(fake *fakeaws.Server, release string) []string {
	var ids []string
	for _, im := range fake.InventorySnapshot().Images {
		if strings.HasPrefix(im.Name, "amazon-eks-node-al2023-") && strings.HasSuffix(im.Name, "-"+release) {
			ids = append(ids, im.ID)
		}
	}
	return ids
}

// checkRefusedAWS: the aws rules let the ServiceAccount read and patch
// EC2NodeClasses, not create or delete them.
func checkRefusedAWS(ctx context.Context, t *testing.T, token *rest.Config) {
	t.Helper()
	c := newClient(t, token)
	if err := c.List(ctx, &awsv1.EC2NodeClassList{}); err != nil {
		t.Errorf("listing EC2NodeClasses: %v", err)
	}
	for what, err := range map[string]error{
		"creating an EC2NodeClass": c.Create(ctx, &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}, Role: "r",
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{ID: "sg-1"}}}}),
		"deleting an EC2NodeClass": c.Delete(ctx, &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", what, err)
		}
	}
}
