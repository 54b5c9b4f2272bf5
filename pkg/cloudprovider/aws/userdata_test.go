package aws

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

var testCluster = Cluster{Name: "demo", Endpoint: "https://demo.example", CABundle: "Q0E=", ServiceCIDR: "10.100.0.0/16"}

func testBootstrap(family string, userData *string) Bootstrap {
	claim := claimWith()
	claim.Labels["team"] = "payments"
	claim.Labels["kubernetes.io/hostname-override"] = "not for the kubelet"
	claim.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: aws.String(family), UserData: userData,
		Kubelet: &awsv1.KubeletConfiguration{KubeReserved: map[string]awsv1.ReservedQuantity{"cpu": "200m"}}}}
	return BootstrapFor(claim, nc, testCluster, 29)
}

// mimeParts splits a MIME multi-part document into its parts' content types and bodies.
func mimeParts(t *testing.T, doc string) ([]string, []string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var types, bodies []string
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return types, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		types = append(types, p.Header.Get("Content-Type"))
		bodies = append(bodies, string(b))
	}
}

func TestAL2023UserData(t *testing.T) {
	script := "#!/bin/bash\necho hello\n"
	userMIME := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho one\n--BOUNDARY--\n"
	tests := []struct {
		name      string
		userData  *string
		wantTypes []string
	}{
		{name: "ours alone", wantTypes: []string{"application/node.eks.aws"}},
		{name: "a user script goes first", userData: &script, wantTypes: []string{`text/x-shellscript; charset="us-ascii"`, "application/node.eks.aws"}},
		{name: "a user MIME document's parts go first", userData: &userMIME, wantTypes: []string{"text/x-shellscript", "application/node.eks.aws"}},
		{name: "a MIME document after blank lines and spaces, headers in any case", userData: aws.String("\n  \n" + strings.Replace(userMIME, "MIME-Version", "mime-version", 1)),
			wantTypes: []string{"text/x-shellscript", "application/node.eks.aws"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := UserData(testBootstrap(awsv1.AMIFamilyAL2023, tt.userData))
			if err != nil {
				t.Fatal(err)
			}
			types, bodies := mimeParts(t, doc)
			if diff := cmp.Diff(tt.wantTypes, types); diff != "" {
				t.Fatalf("parts (-want +got):\n%s", diff)
			}
			var cfg struct {
				Kind string
				Spec struct {
					Cluster struct {
						Name, APIServerEndpoint, CertificateAuthority, CIDR string
					}
					Kubelet struct {
						Config map[string]any
						Flags  []string
					}
				}
			}
			if err := yaml.Unmarshal([]byte(bodies[len(bodies)-1]), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.Kind != "NodeConfig" || cfg.Spec.Cluster.Name != "demo" || cfg.Spec.Cluster.APIServerEndpoint != "https://demo.example" ||
				cfg.Spec.Cluster.CertificateAuthority != "Q0E=" || cfg.Spec.Cluster.CIDR != "10.100.0.0/16" {
				t.Errorf("cluster: %+v", cfg)
			}
			if cfg.Spec.Kubelet.Config["maxPods"] != float64(29) {
				t.Errorf("maxPods: %v", cfg.Spec.Kubelet.Config["maxPods"])
			}
			if diff := cmp.Diff([]any{"10.100.0.10"}, cfg.Spec.Kubelet.Config["clusterDNS"]); diff != "" {
				t.Errorf("clusterDNS (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]any{"cpu": "200m"}, cfg.Spec.Kubelet.Config["kubeReserved"]); diff != "" {
				t.Errorf("kubeReserved (-want +got):\n%s", diff)
			}
			wantFlags := []string{
				"--node-labels=karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,team=payments",
				"--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute",
			}
			if diff := cmp.Diff(wantFlags, cfg.Spec.Kubelet.Flags); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBottlerocketUserData(t *testing.T) {
	user := `[settings.kubernetes]
cluster-name = "someone-else"
[settings.kubernetes.node-labels]
"owner" = "me"
[settings.host-containers.admin]
enabled = true
`
	doc, err := UserData(testBootstrap(awsv1.AMIFamilyBottlerocket, &user))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Settings struct {
			Kubernetes struct {
				ClusterName string              `toml:"cluster-name"`
				APIServer   string              `toml:"api-server"`
				Certificate string              `toml:"cluster-certificate"`
				DNS         string              `toml:"cluster-dns-ip"`
				MaxPods     int                 `toml:"max-pods"`
				Labels      map[string]string   `toml:"node-labels"`
				Taints      map[string][]string `toml:"node-taints"`
				KubeRes     map[string]string   `toml:"kube-reserved"`
			} `toml:"kubernetes"`
			HostContainers map[string]map[string]bool `toml:"host-containers"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(doc, &got); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	k := got.Settings.Kubernetes
	if k.ClusterName != "demo" || k.APIServer != "https://demo.example" || k.Certificate != "Q0E=" || k.DNS != "10.100.0.10" || k.MaxPods != 29 {
		t.Errorf("cluster settings replace the user's: %+v", k)
	}
	if diff := cmp.Diff(map[string]string{"owner": "me", "team": "payments", v1.NodePoolLabelKey: "default", v1.NodeDoNotSyncTaintsLabelKey: "true"}, k.Labels); diff != "" {
		t.Errorf("labels merge (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"dedicated": {"gpu:NoSchedule"}, "karpenter.sh/unregistered": {":NoExecute"}}, k.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if k.KubeRes["cpu"] != "200m" {
		t.Errorf("kube-reserved: %v", k.KubeRes)
	}
	if !got.Settings.HostContainers["admin"]["enabled"] {
		t.Error("the user's other settings must stay")
	}
	bad := "not = [toml"
	if _, err := UserData(testBootstrap(awsv1.AMIFamilyBottlerocket, &bad)); err == nil {
		t.Error("invalid TOML must be an error")
	}
}

func TestCustomUserData(t *testing.T) {
	mine := "#!/bin/bash\n/etc/eks/bootstrap.sh demo\n"
	got, err := UserData(testBootstrap(awsv1.AMIFamilyCustom, &mine))
	if err != nil || got != mine {
		t.Errorf("custom user data must be the user's as-is: %q, %v", got, err)
	}
}

func TestAL2UserData(t *testing.T) {
	user := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"EXAMPLEBOUNDARY\"\n\n--EXAMPLEBOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\necho custom\n--EXAMPLEBOUNDARY--\n"
	doc, err := UserData(testBootstrap(awsv1.AMIFamilyAL2, &user))
	if err != nil {
		t.Fatal(err)
	}
	types, bodies := mimeParts(t, doc)
	if diff := cmp.Diff([]string{shellScript, shellScript}, types); diff != "" {
		t.Fatalf("parts (-want +got):\n%s", diff)
	}
	if !strings.Contains(bodies[0], "echo custom") {
		t.Errorf("the user's script must run first: %q", bodies[0])
	}
	want := "/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://demo.example' --b64-cluster-ca 'Q0E=' --dns-cluster-ip '10.100.0.10' " +
		"--use-max-pods false --kubelet-extra-args '--node-labels=\"karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,team=payments\" " +
		"--register-with-taints=\"dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\" --max-pods=29 --kube-reserved=\"cpu=200m\"'"
	if !strings.Contains(bodies[1], want) {
		t.Errorf("bootstrap script:\n%s\nwant it to contain:\n%s", bodies[1], want)
	}
	// A bare script is a shell script part, not a nodeadm document as on AL2023.
	bare := "echo no shebang"
	doc, err = UserData(testBootstrap(awsv1.AMIFamilyAL2, &bare))
	if err != nil {
		t.Fatal(err)
	}
	if types, _ := mimeParts(t, doc); types[0] != shellScript {
		t.Errorf("bare user data part: %q", types[0])
	}
}

func TestWindowsUserData(t *testing.T) {
	user := "New-Item -Path 'C:\\temp\\' -ItemType Directory\n"
	for _, family := range []string{awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025} {
		doc, err := UserData(testBootstrap(family, &user))
		if err != nil {
			t.Fatal(err)
		}
		want := "<powershell>\nNew-Item -Path 'C:\\temp\\' -ItemType Directory\n" +
			"[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n" +
			"& $EKSBootstrapScriptFile -EKSClusterName 'demo' -APIServerEndpoint 'https://demo.example' -Base64ClusterCA 'Q0E=' " +
			"-KubeletExtraArgs '--node-labels=\"karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,team=payments\" " +
			"--register-with-taints=\"dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\" --max-pods=29 --kube-reserved=\"cpu=200m\"' " +
			"-DNSClusterIP '10.100.0.10'\n</powershell>\n"
		if diff := cmp.Diff(want, doc); diff != "" {
			t.Errorf("%s (-want +got):\n%s", family, diff)
		}
	}
	// The user's own <powershell> tags are not nested in ours.
	tagged := "<powershell>\nWrite-Host hi\n</powershell>"
	doc, _ := UserData(testBootstrap(awsv1.AMIFamilyWindows2022, &tagged))
	if strings.Count(doc, "<powershell>") != 1 || !strings.HasPrefix(doc, "<powershell>\nWrite-Host hi\n[string]") {
		t.Errorf("user tags:\n%s", doc)
	}
}

// nodeadm refuses a NodeConfig without spec.cluster.cidr, so AL2023 user data is
// never rendered without the service CIDR; an IPv6 cluster's range and DNS
// address are IPv6.
func TestAL2023ServiceCIDR(t *testing.T) {
	b := testBootstrap(awsv1.AMIFamilyAL2023, nil)
	b.Cluster.ServiceCIDR, b.Cluster.ServiceCIDRError = "", errors.New("AccessDenied: eks:DescribeCluster")
	if _, err := UserData(b); err == nil || !strings.Contains(err.Error(), "service CIDR") || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("without the service CIDR: %v, want an error naming it and why", err)
	}

	b = testBootstrap(awsv1.AMIFamilyAL2023, nil)
	b.Cluster.ServiceCIDR = "fd00:10:96::/108"
	doc, err := UserData(b)
	if err != nil {
		t.Fatal(err)
	}
	_, bodies := mimeParts(t, doc)
	var cfg struct {
		Spec struct {
			Cluster struct{ CIDR string }
			Kubelet struct{ Config map[string]any }
		}
	}
	if err := yaml.Unmarshal([]byte(bodies[len(bodies)-1]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Spec.Cluster.CIDR != "fd00:10:96::/108" {
		t.Errorf("cidr %q", cfg.Spec.Cluster.CIDR)
	}
	if diff := cmp.Diff([]any{"fd00:10:96::a"}, cfg.Spec.Kubelet.Config["clusterDNS"]); diff != "" {
		t.Errorf("clusterDNS (-want +got):\n%s", diff)
	}
}

// Every family but Custom has its kubelet register the claim's taints, and says so
// with karpenter.sh/do-not-sync-taints, as Karpenter does: registration then does
// not put back a startup taint removed in the meantime.
func TestDoNotSyncTaintsLabel(t *testing.T) {
	for _, family := range []string{awsv1.AMIFamilyAL2023, awsv1.AMIFamilyAL2, awsv1.AMIFamilyBottlerocket, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyCustom} {
		b := testBootstrap(family, nil)
		want := "true"
		if family == awsv1.AMIFamilyCustom {
			want = ""
		}
		if got := b.Labels[v1.NodeDoNotSyncTaintsLabelKey]; got != want {
			t.Errorf("%s: %s = %q, want %q", family, v1.NodeDoNotSyncTaintsLabelKey, got, want)
		}
	}
}
