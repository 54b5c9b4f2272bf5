package sandbox

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodetailor/tailor/internal/fakeaws"
)

//go:embed aws.yaml
var awsDefaults string

// Clouds the sandbox runs on.
const (
	CloudSim = "sim"
	CloudAWS = "aws"
)

// AWSCluster is the fake AWS's EKS cluster, whose name tags the subnets and
// security groups the default EC2NodeClass discovers.
const AWSCluster = "tailor-sandbox"

// sandboxAccount is the fake AWS account's ID.
const sandboxAccount = "123456789012"

// fakeAWSURLFile holds the fake AWS's endpoint once it serves.
const fakeAWSURLFile = "fake-aws-url"

// awsManifests are the EC2NodeClass and NodePool of the sandbox on AWS.
func awsManifests() []byte {
	return []byte(strings.ReplaceAll(awsDefaults, "${CLUSTER_NAME}", AWSCluster))
}

// ServeFakeAWS is the sandbox's fake AWS account (`tailor sandbox fake-aws`, run
// by Up as a process of its own so that it outlives Up): it serves EC2, SSM,
// Pricing, EKS, IAM and SQS on a loopback port, written to the sandbox directory,
// and plays the kubelets of its instances, whose Nodes kwok then keeps Ready.
func ServeFakeAWS(ctx context.Context, dir string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(dir))
	if err != nil {
		return err
	}
	kube, err := newClient(cfg)
	if err != nil {
		return err
	}
	version := serverVersion(cfg)
	opts := fakeaws.LocalClusterOptions(AWSCluster, version, cfg.Host, cfg.CAData)
	// The account also holds what Karpenter's public examples select, so that they
	// run here unchanged but for the cluster name.
	opts.AccountID = sandboxAccount
	keepZones := opts.Inventory
	examples := fakeaws.KarpenterExamples(AWSCluster, version, sandboxAccount)
	opts.Inventory = func(inv *fakeaws.Inventory) { keepZones(inv); examples(inv) }
	fake, err := fakeaws.New(opts)
	if err != nil {
		return err
	}
	// The controller calls the fake with the SDK's own HTTP client, which on
	// loopback can lose a race with an instant answer (see fakeaws.AWSConfig);
	// AWS answers in milliseconds, and so does the fake.
	for _, svc := range []string{"ec2", "iam", "sqs", "ssm", "pricing", "eks"} {
		fake.SetLatency(svc+":*", 5*time.Millisecond)
	}
	url, err := fake.Start()
	if err != nil {
		return err
	}
	defer fake.Close()
	tmp := filepath.Join(dir, fakeAWSURLFile+".tmp")
	if err := os.WriteFile(tmp, []byte(url), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, fakeAWSURLFile)); err != nil {
		return err
	}
	err = fakeaws.NewKubelet(fake, kube, fakeaws.KubeletOptions{RegistrationDelay: time.Second}).Run(ctx, 500*time.Millisecond)
	if ctx.Err() != nil {
		return nil // stopped by `sandbox down`
	}
	return err
}

// serverVersion is the API server's major.minor, which the controller reads to
// pick the AMIs of an alias; the fake publishes its AMIs for it.
func serverVersion(cfg *rest.Config) string {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return ""
	}
	v, err := dc.ServerVersion()
	if err != nil || v.Major == "" {
		return ""
	}
	return v.Major + "." + strings.TrimRight(v.Minor, "+")
}

// startFakeAWS runs ServeFakeAWS in the background and returns its endpoint.
func startFakeAWS(ctx context.Context, opts Options) (string, error) {
	exited, logFile, err := startDetached(opts.Dir, "fake-aws", "fake-aws.log", exec.Command(opts.Tailor, "sandbox", "fake-aws", "--dir", opts.Dir))
	if err != nil {
		return "", err
	}
	deadline := time.After(30 * time.Second)
	for {
		url, err := os.ReadFile(filepath.Join(opts.Dir, fakeAWSURLFile))
		if err == nil {
			return string(url), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("the fake AWS exited (%v); see %s", err, logFile)
		case <-deadline:
			return "", fmt.Errorf("the fake AWS does not serve after 30s; see %s", logFile)
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awsControllerEnv is the controller's environment on the fake: the SDK's
// standard variables name its endpoint, region and credentials, and nothing of
// the user's own AWS configuration (profiles, credentials, instance metadata) is
// read, so the sandbox can never reach a real account.
func awsControllerEnv(url string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AWS_") })
	return append(env,
		"AWS_ENDPOINT_URL="+url,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIAFAKEAWSSANDBOX",
		"AWS_SECRET_ACCESS_KEY=fakeaws-sandbox",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE="+os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
	)
}

// awsControllerArgs are the controller's flags on the fake.
func awsControllerArgs() []string {
	return []string{"--cloud-provider", "aws", "--cluster-name", AWSCluster, "--interruption-queue", AWSCluster}
}
