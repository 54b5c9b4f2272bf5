package crd_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/internal/testenv"
)

// The EC2NodeClass CRD is checked against a real kube-apiserver: what it accepts,
// defaults and rejects is what `kubectl apply` does with Karpenter's own manifests.
var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

// examplesDir holds Karpenter's public examples/v1 manifests, copied unchanged.
const examplesDir = "../../examples/aws-karpenter"

// exampleRejections are the example files the API refuses, each with the error and
// why. Karpenter's own CRDs refuse the same documents under strict field validation
// (kubectl's default); they are kept unchanged so that a change of the API shows up
// here. See examples/aws-karpenter/README.md.
var exampleRejections = map[string]struct{ kind, message, why string }{
	"placement-group.yaml": {kind: "EC2NodeClass", message: `unknown field "spec.placementGroup"`,
		why: "the example is written for spec.placementGroup {name, id, partition}, the shape of a Karpenter pull request that was " +
			"not merged (aws/karpenter-provider-aws#9013); Karpenter serves spec.placementGroupSelector {name | id} (#9030), as Tailor does"},
	"max-node-lifetime.yaml": {kind: "NodePool", message: `unknown field "spec.template.spec.terminationGracePeirod"`,
		why: "the example misspells terminationGracePeriod; strict field validation (kubectl's default) refuses it"},
	"windows-custom-userdata.yaml": {kind: "NodePool", message: "spec.template.spec.nodeClassRef.group: Invalid value",
		why: "the example's nodeClassRef.group is karpenter.k8s.aws/v1, a group/version, which the NodePool API refuses (pattern ^[^/]*$)"},
}

// exampleFamilies is the AMI family each accepted example EC2NodeClass resolves to.
var exampleFamilies = map[string]string{
	"100-cpu-limit.yaml":                    awsv1.AMIFamilyAL2023,
	"al2-custom-ami.yaml":                   awsv1.AMIFamilyAL2,
	"al2-custom-userdata.yaml":              awsv1.AMIFamilyAL2023,
	"al2-kubelet-log-query.yaml":            awsv1.AMIFamilyAL2023,
	"al2023-custom-userdata.yaml":           awsv1.AMIFamilyAL2023,
	"bottlerocket-fips.yaml":                awsv1.AMIFamilyBottlerocket,
	"bottlerocket.yaml":                     awsv1.AMIFamilyBottlerocket,
	"br-custom-userdata.yaml":               awsv1.AMIFamilyBottlerocket,
	"custom-family-with-alias.yaml":         awsv1.AMIFamilyCustom,
	"custom-family.yaml":                    awsv1.AMIFamilyCustom,
	"general-purpose.yaml":                  awsv1.AMIFamilyAL2023,
	"instance-store-ephemeral-storage.yaml": awsv1.AMIFamilyAL2023,
	"large-instances.yaml":                  awsv1.AMIFamilyAL2023,
	"min-values-family.yaml":                awsv1.AMIFamilyAL2023,
	"min-values-multiple-keys.yaml":         awsv1.AMIFamilyAL2023,
	"multiple-arch.yaml":                    awsv1.AMIFamilyAL2023,
	"multiple-ebs.yaml":                     awsv1.AMIFamilyAL2023,
	"node-ttls.yaml":                        awsv1.AMIFamilyAL2023,
	"security-group-with-vpc.yaml":          awsv1.AMIFamilyAL2023,
	"spot.yaml":                             awsv1.AMIFamilyAL2023,
	"windows-2019.yaml":                     awsv1.AMIFamilyWindows2019,
	"windows-2022.yaml":                     awsv1.AMIFamilyWindows2022,
	"windows-2025.yaml":                     awsv1.AMIFamilyWindows2025,
}

// Every example applies as written (strict field validation, as kubectl does) and
// reads back with the defaults filled in and nothing lost — or is one of the
// documented rejections.
func TestKarpenterExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", examplesDir, err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			rejection, rejected := exampleRejections[name]
			seenRejection, classes := false, 0
			for _, doc := range documents(t, file) {
				u, err := create(t, doc)
				if u == nil {
					u = &unstructured.Unstructured{Object: doc}
				}
				if rejected && u.GetKind() == rejection.kind && err != nil {
					if !strings.Contains(err.Error(), rejection.message) {
						t.Errorf("%s %s rejected with %v; want %q (%s)", u.GetKind(), u.GetName(), err, rejection.message, rejection.why)
					}
					seenRejection = true
					continue
				}
				if err != nil {
					t.Errorf("%s %s rejected: %v", u.GetKind(), u.GetName(), err)
					continue
				}
				if u.GetKind() == "EC2NodeClass" {
					classes++
					checkStored(t, doc, u, exampleFamilies[name])
				}
				// tailor simulate admits files offline: it must agree with the server.
				if err := admitOffline(t, u.GetKind(), doc); err != nil {
					t.Errorf("the server accepts %s %s, offline validation refuses it: %v", u.GetKind(), u.GetName(), err)
				}
			}
			if rejected && !seenRejection {
				t.Errorf("expected the %s to be refused (%s), but every document applied: update exampleRejections", rejection.kind, rejection.why)
			}
			if !rejected && classes == 0 && exampleFamilies[name] != "" {
				t.Errorf("no EC2NodeClass applied from %s", name)
			}
		})
	}
}

// checkStored compares the stored EC2NodeClass with what was sent: equal once the
// CRD's defaults are applied, so no field was pruned, renamed or mistyped.
func checkStored(t *testing.T, sent map[string]any, stored *unstructured.Unstructured, family string) {
	t.Helper()
	want := typed[awsv1.EC2NodeClass](t, sent)
	withDefaults(&want.Spec)
	got := typed[awsv1.EC2NodeClass](t, stored.Object)
	if diff := cmp.Diff(want.Spec, got.Spec, quantities); diff != "" {
		t.Errorf("stored spec differs from the sent one with defaults (-want +got):\n%s", diff)
	}
	if family != "" && got.AMIFamily() != family {
		t.Errorf("AMIFamily() = %q, want %q", got.AMIFamily(), family)
	}
}

// withDefaults applies the CRD's defaults as the Go types describe them.
func withDefaults(spec *awsv1.EC2NodeClassSpec) {
	if spec.MetadataOptions == nil {
		spec.MetadataOptions = &awsv1.MetadataOptions{}
	}
	m := spec.MetadataOptions
	m.HTTPEndpoint = orDefault(m.HTTPEndpoint, "enabled")
	m.HTTPProtocolIPv6 = orDefault(m.HTTPProtocolIPv6, "disabled")
	m.HTTPPutResponseHopLimit = orDefault(m.HTTPPutResponseHopLimit, 1)
	m.HTTPTokens = orDefault(m.HTTPTokens, "required")
}

func orDefault[T any](p *T, def T) *T {
	if p == nil {
		return &def
	}
	return p
}

var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

const baseSpec = `
role: KarpenterNodeRole-test
subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
amiSelectorTerms: [{alias: al2023@latest}]
`

// nodeClass is a valid EC2NodeClass with the top-level spec fields of patch
// replacing the base's (a null removes one), named after the test.
func nodeClass(t *testing.T, patch string) map[string]any {
	t.Helper()
	spec := decode(t, baseSpec)
	for k, v := range decode(t, patch) {
		if v == nil {
			delete(spec, k)
		} else {
			spec[k] = v
		}
	}
	return map[string]any{
		"apiVersion": "karpenter.k8s.aws/v1",
		"kind":       "EC2NodeClass",
		"metadata":   map[string]any{"name": objectName(t)},
		"spec":       spec,
	}
}

func TestEC2NodeClassDefaults(t *testing.T) {
	for name, tc := range map[string]struct {
		patch string
		want  awsv1.MetadataOptions
	}{
		"left out": {want: awsv1.MetadataOptions{HTTPEndpoint: ptr.To("enabled"), HTTPProtocolIPv6: ptr.To("disabled"),
			HTTPPutResponseHopLimit: ptr.To[int64](1), HTTPTokens: ptr.To("required")}},
		"empty": {patch: "metadataOptions: {}", want: awsv1.MetadataOptions{HTTPEndpoint: ptr.To("enabled"),
			HTTPProtocolIPv6: ptr.To("disabled"), HTTPPutResponseHopLimit: ptr.To[int64](1), HTTPTokens: ptr.To("required")}},
		"partly set": {patch: "metadataOptions: {httpPutResponseHopLimit: 2, httpTokens: optional}", want: awsv1.MetadataOptions{
			HTTPEndpoint: ptr.To("enabled"), HTTPProtocolIPv6: ptr.To("disabled"), HTTPPutResponseHopLimit: ptr.To[int64](2), HTTPTokens: ptr.To("optional")}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := create(t, nodeClass(t, tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			nc := typed[awsv1.EC2NodeClass](t, got.Object)
			if diff := cmp.Diff(&tc.want, nc.Spec.MetadataOptions); diff != "" {
				t.Errorf("metadataOptions (-want +got):\n%s", diff)
			}
		})
	}
}

// EC2NodeClasses using every field: accepted, and read back as sent.
func TestValidEC2NodeClasses(t *testing.T) {
	for name, patch := range map[string]string{
		"instance profile, images by name and owner": `
role: null
instanceProfile: KarpenterNodeInstanceProfile-test
amiFamily: AL2023
amiSelectorTerms:
- {name: "amazon-eks-node-al2023-x86_64-standard-1.34-*", owner: amazon}
- {name: my-ami, owner: "123456789012"}
- {tags: {team: platform, env: "*"}}`,
		"ids and ssm parameter": `
amiFamily: Bottlerocket
amiSelectorTerms:
- {id: ami-0123456789abcdef0}
- {ssmParameter: /aws/service/bottlerocket/aws-k8s-1.34/x86_64/latest/image_id}
subnetSelectorTerms: [{id: subnet-0a1b2c3d}, {id: subnet-0e1f2a3b}]
securityGroupSelectorTerms: [{id: sg-0123abcd}, {name: eks-cluster-sg}, {tags: {Name: "*node*"}}]`,
		"custom family with a pinned alias": `
amiFamily: Custom
amiSelectorTerms: [{alias: bottlerocket@v1.20.3}]
userData: |
  [settings.kubernetes]
  kube-api-qps = 30`,
		"kubelet": `
kubelet:
  clusterDNS: ["10.0.0.10"]
  maxPods: 110
  podsPerCore: 10
  systemReserved: {cpu: 100m, memory: 100Mi, ephemeral-storage: 1Gi, pid: "100"}
  kubeReserved: {cpu: 200m, memory: 1.5Gi, ephemeral-storage: 3Gi}
  evictionHard: {memory.available: 5%, nodefs.available: 10%, nodefs.inodesFree: 10%, imagefs.available: 100Mi}
  evictionSoft: {memory.available: 500Mi, pid.available: 10.5%}
  evictionSoftGracePeriod: {memory.available: 1m, pid.available: 1m30s}
  evictionMaxPodGracePeriod: 60
  imageGCHighThresholdPercent: 85
  imageGCLowThresholdPercent: 80
  cpuCFSQuota: true`,
		"disks and instance store": `
instanceStorePolicy: RAID0
blockDeviceMappings:
- deviceName: /dev/xvda
  rootVolume: true
  ebs: {volumeSize: 100Gi, volumeType: gp3, iops: 10000, throughput: 125, encrypted: true, deleteOnTermination: true,
        kmsKeyID: "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"}
- deviceName: /dev/xvdb
  ebs: {snapshotID: snap-0123456789, volumeInitializationRate: 200, volumeType: io2, iops: 64000}
- deviceName: /dev/xvdc
  ebs: {volumeSize: 2T, volumeType: st1}`,
		"network, capacity reservations, tags, monitoring": `
associatePublicIPAddress: false
ipPrefixCount: 2
detailedMonitoring: true
context: "ctx-0123"
capacityReservationSelectorTerms:
- {id: cr-0123456789abcdef0}
- {tags: {team: ml}, ownerID: "123456789012"}
- {instanceMatchCriteria: open}
tags: {Name: my-node, team: payments, karpenter.sh/discovery: test, kubernetes.io/role: node}
metadataOptions: {httpEndpoint: disabled, httpProtocolIPv6: enabled, httpPutResponseHopLimit: 64, httpTokens: optional}`,
		"windows 2025": `
amiSelectorTerms: [{alias: windows2025@latest}]
amiFamily: Windows2025`,
		"placement group by name": `
placementGroupSelector: {name: analytics-partition}`,
		"shared placement group by id": `
placementGroupSelector: {id: pg-0123456789abcdef0}`,
		"security groups of one vpc": `
securityGroupSelectorTerms:
- {name: k8s-node, vpcID: vpc-12345678}
- {tags: {karpenter.sh/discovery: test}, vpcID: vpc-12345678}
- {id: sg-0123abcd, vpcID: vpc-0a1b2c3d4e5f}`,
		"bottlerocket fips": `
amiSelectorTerms: [{alias: bottlerocket-fips@latest}]`,
		"bottlerocket fips pinned, family named": `
amiSelectorTerms: [{alias: bottlerocket-fips@v1.20.3}]
amiFamily: Bottlerocket`,
		"custom family over bottlerocket fips": `
amiSelectorTerms: [{alias: bottlerocket-fips@latest}]
amiFamily: Custom`,
	} {
		t.Run(name, func(t *testing.T) {
			sent := nodeClass(t, patch)
			got, err := create(t, sent)
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			checkStored(t, sent, got, "")
			if err := admitOffline(t, "EC2NodeClass", sent); err != nil {
				t.Errorf("the server accepts it, offline validation refuses it: %v", err)
			}
		})
	}
}

// One invalid EC2NodeClass per rule, each rejected with the field and the message
// Karpenter's API gives.
func TestInvalidEC2NodeClasses(t *testing.T) {
	const restricted = "tag contains a restricted tag matching "
	for name, tc := range map[string]struct{ patch, field, message string }{
		// subnets
		"no subnetSelectorTerms": {patch: "subnetSelectorTerms: null",
			field: "spec.subnetSelectorTerms", message: "Required value"},
		"empty subnetSelectorTerms": {patch: "subnetSelectorTerms: []",
			field: "spec.subnetSelectorTerms", message: "subnetSelectorTerms cannot be empty"},
		"empty subnet term": {patch: "subnetSelectorTerms: [{}]",
			field: "spec.subnetSelectorTerms", message: "expected at least one, got none, ['tags', 'id']"},
		"subnet id with tags": {patch: "subnetSelectorTerms: [{id: subnet-123, tags: {a: b}}]",
			field: "spec.subnetSelectorTerms", message: "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
		"malformed subnet id": {patch: "subnetSelectorTerms: [{id: sn-123}]",
			field: "spec.subnetSelectorTerms[0].id", message: "should match 'subnet-[0-9a-z]+'"},
		"empty subnet tag value": {patch: `subnetSelectorTerms: [{tags: {Name: ""}}]`,
			field: "spec.subnetSelectorTerms[0].tags", message: "empty tag keys or values aren't supported"},
		"too many subnet tags": {patch: "subnetSelectorTerms: [{tags: {" + manyTags(21) + "}}]",
			field: "spec.subnetSelectorTerms[0].tags", message: "must have at most 20 items"},
		"too many subnet terms": {patch: "subnetSelectorTerms: [" + strings.Repeat("{id: subnet-1}, ", 30) + "{id: subnet-1}]",
			field: "spec.subnetSelectorTerms", message: "must have at most 30 items"},
		// security groups
		"no securityGroupSelectorTerms": {patch: "securityGroupSelectorTerms: null",
			field: "spec.securityGroupSelectorTerms", message: "Required value"},
		"empty securityGroupSelectorTerms": {patch: "securityGroupSelectorTerms: []",
			field: "spec.securityGroupSelectorTerms", message: "securityGroupSelectorTerms cannot be empty"},
		"empty security group term": {patch: "securityGroupSelectorTerms: [{}]",
			field: "spec.securityGroupSelectorTerms", message: "expected at least one, got none, ['tags', 'id', 'name']"},
		"security group id with name": {patch: "securityGroupSelectorTerms: [{id: sg-123, name: nodes}]",
			field: "spec.securityGroupSelectorTerms", message: "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
		"security group name with tags": {patch: "securityGroupSelectorTerms: [{name: nodes, tags: {a: b}}]",
			field: "spec.securityGroupSelectorTerms", message: "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
		"malformed security group id": {patch: "securityGroupSelectorTerms: [{id: group-1}]",
			field: "spec.securityGroupSelectorTerms[0].id", message: "should match 'sg-[0-9a-z]+'"},
		"vpcID alone": {patch: "securityGroupSelectorTerms: [{vpcID: vpc-12345678}]",
			field: "spec.securityGroupSelectorTerms", message: "expected at least one, got none, ['tags', 'id', 'name']"},
		"malformed vpcID": {patch: "securityGroupSelectorTerms: [{name: nodes, vpcID: my-vpc}]",
			field: "spec.securityGroupSelectorTerms[0].vpcID", message: "should match 'vpc-[0-9a-z]+'"},
		"vpcID does not lift id's exclusivity": {patch: "securityGroupSelectorTerms: [{id: sg-123, name: nodes, vpcID: vpc-123}]",
			field: "spec.securityGroupSelectorTerms", message: "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
		// placement group
		"placement group by name and id": {patch: "placementGroupSelector: {name: analytics, id: pg-0123}",
			field: "spec.placementGroupSelector", message: "expected exactly one of ['name', 'id']"},
		"empty placement group selector": {patch: "placementGroupSelector: {}",
			field: "spec.placementGroupSelector", message: "expected exactly one of ['name', 'id']"},
		"malformed placement group id": {patch: "placementGroupSelector: {id: analytics}",
			field: "spec.placementGroupSelector.id", message: "should match '^pg-[0-9a-z]+$'"},
		"empty placement group name": {patch: `placementGroupSelector: {name: ""}`,
			field: "spec.placementGroupSelector.name", message: "should be at least 1 chars long"},
		// capacity reservations
		"empty capacity reservation term": {patch: "capacityReservationSelectorTerms: [{}]",
			field: "spec.capacityReservationSelectorTerms", message: "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
		"capacity reservation id with owner": {patch: `capacityReservationSelectorTerms: [{id: cr-123, ownerID: "123456789012"}]`,
			field: "spec.capacityReservationSelectorTerms", message: "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
		"malformed capacity reservation id": {patch: "capacityReservationSelectorTerms: [{id: cr-ABC}]",
			field: "spec.capacityReservationSelectorTerms[0].id", message: "should match '^cr-[0-9a-z]+$'"},
		"malformed capacity reservation owner": {patch: `capacityReservationSelectorTerms: [{tags: {a: b}, ownerID: "12345"}]`,
			field: "spec.capacityReservationSelectorTerms[0].ownerID", message: "should match '^[0-9]{12}$'"},
		"instance match criteria": {patch: "capacityReservationSelectorTerms: [{instanceMatchCriteria: closed}]",
			field: "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria", message: `Unsupported value: "closed"`},
		// AMIs
		"no amiSelectorTerms": {patch: "amiSelectorTerms: null",
			field: "spec.amiSelectorTerms", message: "Required value"},
		"empty amiSelectorTerms": {patch: "amiSelectorTerms: []",
			field: "spec.amiSelectorTerms", message: "should have at least 1 items"},
		"ami term with only an owner": {patch: "amiFamily: AL2023\namiSelectorTerms: [{owner: self}]",
			field: "spec.amiSelectorTerms", message: "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
		"alias with tags": {patch: "amiSelectorTerms: [{alias: al2023@latest, tags: {a: b}}]",
			field: "spec.amiSelectorTerms", message: "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
		"alias with another term": {patch: "amiSelectorTerms: [{alias: al2023@latest}, {id: ami-123}]",
			field: "spec.amiSelectorTerms", message: "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
		"ami id with a name": {patch: "amiFamily: AL2\namiSelectorTerms: [{id: ami-123, name: my-ami}]",
			field: "spec.amiSelectorTerms", message: "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
		"malformed ami id": {patch: "amiFamily: AL2\namiSelectorTerms: [{id: image-1}]",
			field: "spec.amiSelectorTerms[0].id", message: "should match 'ami-[0-9a-z]+'"},
		"alias without a version": {patch: "amiSelectorTerms: [{alias: al2023}]",
			field: "spec.amiSelectorTerms[0].alias", message: "'alias' is improperly formatted, must match the format 'family@version'"},
		"alias of an unknown family": {patch: "amiSelectorTerms: [{alias: ubuntu@latest}]",
			field: "spec.amiSelectorTerms[0].alias", message: "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'bottlerocket-fips', 'windows2019', 'windows2022', 'windows2025'"},
		"fips variant of another family": {patch: "amiSelectorTerms: [{alias: al2023-fips@latest}]",
			field: "spec.amiSelectorTerms[0].alias", message: "family is not supported"},
		"alias family with other punctuation": {patch: "amiSelectorTerms: [{alias: bottlerocket_fips@latest}]",
			field: "spec.amiSelectorTerms[0].alias", message: "'alias' is improperly formatted, must match the format 'family@version'"},
		"alias family in upper case": {patch: "amiSelectorTerms: [{alias: AL2023@latest}]",
			field: "spec.amiSelectorTerms[0].alias", message: "family is not supported"},
		"pinned windows alias": {patch: "amiSelectorTerms: [{alias: windows2022@v20240101}]",
			field: "spec.amiSelectorTerms[0].alias", message: "windows families may only specify version 'latest'"},
		"alias too long": {patch: "amiSelectorTerms: [{alias: al2023@v20240625-0123456789abcdef}]",
			field: "spec.amiSelectorTerms[0].alias", message: "Too long"},
		"unknown amiFamily": {patch: "amiFamily: Ubuntu",
			field: "spec.amiFamily", message: `Unsupported value: "Ubuntu"`},
		"no amiFamily without an alias": {patch: "amiSelectorTerms: [{id: ami-123}]",
			field: "spec", message: "must specify amiFamily if amiSelectorTerms does not contain an alias"},
		"amiFamily against an al2 alias": {patch: "amiSelectorTerms: [{alias: al2@latest}]\namiFamily: AL2023",
			field: "spec", message: "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"},
		"amiFamily against an al2023 alias": {patch: "amiFamily: Bottlerocket",
			field: "spec", message: "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"},
		"amiFamily against a bottlerocket alias": {patch: "amiSelectorTerms: [{alias: bottlerocket@latest}]\namiFamily: AL2",
			field: "spec", message: "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"},
		"amiFamily against a bottlerocket-fips alias": {patch: "amiSelectorTerms: [{alias: bottlerocket-fips@latest}]\namiFamily: AL2023",
			field: "spec", message: "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"},
		"amiFamily against a windows2019 alias": {patch: "amiSelectorTerms: [{alias: windows2019@latest}]\namiFamily: Windows2022",
			field: "spec", message: "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias"},
		"amiFamily against a windows2022 alias": {patch: "amiSelectorTerms: [{alias: windows2022@latest}]\namiFamily: Windows2025",
			field: "spec", message: "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias"},
		"amiFamily against a windows2025 alias": {patch: "amiSelectorTerms: [{alias: windows2025@latest}]\namiFamily: Windows2019",
			field: "spec", message: "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias"},
		// identity
		"role and instanceProfile": {patch: "instanceProfile: my-profile",
			field: "spec", message: "must specify exactly one of ['role', 'instanceProfile']"},
		"neither role nor instanceProfile": {patch: "role: null",
			field: "spec", message: "must specify exactly one of ['role', 'instanceProfile']"},
		"empty role": {patch: `role: ""`,
			field: "spec.role", message: "role cannot be empty"},
		"empty instanceProfile": {patch: "role: null\ninstanceProfile: \"\"",
			field: "spec.instanceProfile", message: "instanceProfile cannot be empty"},
		// tags
		"empty tag key":            {patch: `tags: {"": x}`, field: "spec.tags", message: "empty tag keys aren't supported"},
		"eks cluster name tag":     {patch: "tags: {eks:eks-cluster-name: x}", field: "spec.tags", message: restricted + "eks:eks-cluster-name"},
		"cluster ownership tag":    {patch: "tags: {kubernetes.io/cluster/test: owned}", field: "spec.tags", message: restricted + "kubernetes.io/cluster/"},
		"nodepool tag":             {patch: "tags: {karpenter.sh/nodepool: x}", field: "spec.tags", message: restricted + "karpenter.sh/nodepool"},
		"nodeclaim tag":            {patch: "tags: {karpenter.sh/nodeclaim: x}", field: "spec.tags", message: restricted + "karpenter.sh/nodeclaim"},
		"ec2nodeclass tag":         {patch: "tags: {karpenter.k8s.aws/ec2nodeclass: x}", field: "spec.tags", message: restricted + "karpenter.k8s.aws/ec2nodeclass"},
		"negative ipPrefixCount":   {patch: "ipPrefixCount: -1", field: "spec.ipPrefixCount", message: "should be greater than or equal to 0"},
		"instance store policy":    {patch: "instanceStorePolicy: RAID1", field: "spec.instanceStorePolicy", message: `Unsupported value: "RAID1"`},
		"associatePublicIPAddress": {patch: "associatePublicIPAddress: sometimes", field: "spec.associatePublicIPAddress", message: "must be of type boolean"},
		// kubelet
		"image GC thresholds crossed": {patch: "kubelet: {imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}",
			field: "spec.kubelet", message: "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
		"image GC thresholds equal": {patch: "kubelet: {imageGCHighThresholdPercent: 60, imageGCLowThresholdPercent: 60}",
			field: "spec.kubelet", message: "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
		"image GC threshold above 100": {patch: "kubelet: {imageGCHighThresholdPercent: 101}",
			field: "spec.kubelet.imageGCHighThresholdPercent", message: "should be less than or equal to 100"},
		"negative maxPods": {patch: "kubelet: {maxPods: -1}",
			field: "spec.kubelet.maxPods", message: "should be greater than or equal to 0"},
		"negative podsPerCore": {patch: "kubelet: {podsPerCore: -1}",
			field: "spec.kubelet.podsPerCore", message: "should be greater than or equal to 0"},
		"kubeReserved key": {patch: "kubelet: {kubeReserved: {nvidia.com/gpu: \"1\"}}",
			field: "spec.kubelet.kubeReserved", message: "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']"},
		"negative kubeReserved": {patch: "kubelet: {kubeReserved: {cpu: -100m}}",
			field: "spec.kubelet.kubeReserved", message: "kubeReserved value cannot be a negative resource quantity"},
		"systemReserved key": {patch: "kubelet: {systemReserved: {gpu: \"1\"}}",
			field: "spec.kubelet.systemReserved", message: "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']"},
		"systemReserved not a quantity": {patch: "kubelet: {systemReserved: {memory: lots}}",
			field: "spec.kubelet.systemReserved.memory", message: "should match"},
		"evictionHard signal": {patch: "kubelet: {evictionHard: {memory.free: 100Mi}}",
			field: "spec.kubelet.evictionHard", message: "valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']"},
		"evictionHard threshold": {patch: "kubelet: {evictionHard: {memory.available: 10 percent}}",
			field: "spec.kubelet.evictionHard.memory.available", message: "should match"},
		"evictionHard above 100%": {patch: "kubelet: {evictionHard: {memory.available: 101%}}",
			field: "spec.kubelet.evictionHard.memory.available", message: "should match"},
		"evictionSoft signal": {patch: "kubelet: {evictionSoft: {cpu.available: 1Gi}, evictionSoftGracePeriod: {cpu.available: 1m}}",
			field: "spec.kubelet.evictionSoft", message: "valid keys for evictionSoft are"},
		"evictionSoftGracePeriod signal": {patch: "kubelet: {evictionSoft: {cpu.available: 1Gi}, evictionSoftGracePeriod: {cpu.available: 1m}}",
			field: "spec.kubelet.evictionSoftGracePeriod", message: "valid keys for evictionSoftGracePeriod are"},
		"evictionSoft without grace periods": {patch: "kubelet: {evictionSoft: {memory.available: 1Gi}}",
			field: "spec.kubelet", message: "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
		"evictionSoft and grace periods apart": {patch: "kubelet: {evictionSoft: {memory.available: 1Gi}, evictionSoftGracePeriod: {nodefs.available: 1m}}",
			field: "spec.kubelet", message: "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
		"grace periods without evictionSoft": {patch: "kubelet: {evictionSoftGracePeriod: {memory.available: 1m}}",
			field: "spec.kubelet", message: "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft"},
		// disks
		"two root volumes": {patch: "blockDeviceMappings: [{rootVolume: true, ebs: {volumeSize: 20Gi}}, {rootVolume: true, ebs: {volumeSize: 30Gi}}]",
			field: "spec.blockDeviceMappings", message: "must have only one blockDeviceMappings with rootVolume"},
		"volume without size or snapshot": {patch: "blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeType: gp3}}]",
			field: "spec.blockDeviceMappings[0].ebs", message: "snapshotID or volumeSize must be defined"},
		"initialization rate without snapshot": {patch: "blockDeviceMappings: [{ebs: {volumeSize: 20Gi, volumeInitializationRate: 200}}]",
			field: "spec.blockDeviceMappings[0].ebs", message: "snapshotID must be set when volumeInitializationRate is set"},
		"initialization rate too low": {patch: "blockDeviceMappings: [{ebs: {snapshotID: snap-1, volumeInitializationRate: 50}}]",
			field: "spec.blockDeviceMappings[0].ebs.volumeInitializationRate", message: "should be greater than or equal to 100"},
		"volume size in GB": {patch: "blockDeviceMappings: [{ebs: {volumeSize: 100GB}}]",
			field: "spec.blockDeviceMappings[0].ebs.volumeSize", message: "should match"},
		"volume too large": {patch: "blockDeviceMappings: [{ebs: {volumeSize: 70000Gi}}]",
			field: "spec.blockDeviceMappings[0].ebs.volumeSize", message: "should match"},
		"volume type": {patch: "blockDeviceMappings: [{ebs: {volumeSize: 20Gi, volumeType: gp4}}]",
			field: "spec.blockDeviceMappings[0].ebs.volumeType", message: `Unsupported value: "gp4"`},
		// metadata options
		"httpTokens": {patch: "metadataOptions: {httpTokens: sometimes}",
			field: "spec.metadataOptions.httpTokens", message: `Unsupported value: "sometimes"`},
		"httpEndpoint": {patch: `metadataOptions: {httpEndpoint: "on"}`,
			field: "spec.metadataOptions.httpEndpoint", message: `Unsupported value: "on"`},
		"hop limit zero": {patch: "metadataOptions: {httpPutResponseHopLimit: 0}",
			field: "spec.metadataOptions.httpPutResponseHopLimit", message: "should be greater than or equal to 1"},
		"hop limit above 64": {patch: "metadataOptions: {httpPutResponseHopLimit: 65}",
			field: "spec.metadataOptions.httpPutResponseHopLimit", message: "should be less than or equal to 64"},
	} {
		t.Run(name, func(t *testing.T) {
			obj := nodeClass(t, tc.patch)
			_, err := create(t, obj)
			assertRejected(t, err, tc.field, tc.message)
			assertRejected(t, admitOffline(t, "EC2NodeClass", obj), tc.field, tc.message)
		})
	}
}

// Nodes do not choose a partition: EC2 assigns one, as Karpenter leaves it to. The
// partition field of the unmerged design is an unknown field, refused under strict
// field validation.
func TestPlacementGroupHasNoPartition(t *testing.T) {
	_, err := create(t, nodeClass(t, "placementGroupSelector: {name: analytics, partition: 2}"))
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.placementGroupSelector.partition"`) {
		t.Errorf("created with a partition: %v; want unknown field spec.placementGroupSelector.partition", err)
	}
}

func manyTags(n int) string {
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("k%d: v", i)
	}
	return strings.Join(tags, ", ")
}

// ParseAlias, which the AWS provider uses, and the CRD agree on every alias.
func TestAliasParsingAgreesWithTheCRD(t *testing.T) {
	for _, alias := range []string{
		"al2@latest", "al2023@latest", "al2023@v20240625", "bottlerocket@latest", "bottlerocket@v1.20.3",
		"windows2019@latest", "windows2022@latest", "windows2025@latest", "al2023@v1@x", "windows2022@latest@x",
		"al2023", "al2023@", "@latest", "AL2023@latest", "Bottlerocket@latest", "custom@latest", "ubuntu@latest",
		"bottlerocket-fips@latest", "bottlerocket-fips@v1.20.3", "bottlerocket-fips", "bottlerocket-FIPS@latest",
		"al2023-fips@latest", "-@latest", "bottlerocket_fips@latest", "windows2022@v1", "windows2025@", "al2023 @latest", "al2023@ latest",
	} {
		t.Run(alias, func(t *testing.T) {
			obj := nodeClass(t, "amiSelectorTerms: [{alias: '"+alias+"'}]")
			crdErr := admitOffline(t, "EC2NodeClass", obj)
			_, goErr := awsv1.ParseAlias(alias)
			if (crdErr == nil) != (goErr == nil) {
				t.Errorf("the CRD says %v, ParseAlias says %v", crdErr, goErr)
			}
		})
	}
}

// Status is a subresource with defaults of its own; writing it leaves the spec alone.
func TestEC2NodeClassStatus(t *testing.T) {
	u, err := create(t, nodeClass(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	nc := typed[awsv1.EC2NodeClass](t, u.Object)
	nc.Spec.Role = "changed-through-status"
	nc.Status = awsv1.EC2NodeClassStatus{
		Subnets:        []awsv1.Subnet{{ID: "subnet-1", Zone: "us-west-2a", ZoneID: "usw2-az1"}, {ID: "subnet-2", Zone: "us-west-2b"}},
		SecurityGroups: []awsv1.SecurityGroup{{ID: "sg-1", Name: "nodes"}},
		AMIs: []awsv1.AMI{{ID: "ami-1", Name: "al2023-x86_64", Requirements: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}}}}},
		CapacityReservations: []awsv1.CapacityReservation{{ID: "cr-1", AvailabilityZone: "us-west-2a", InstanceMatchCriteria: "open",
			InstanceType: "m5.large", OwnerID: "123456789012"}},
		InstanceProfile: "test_123",
	}
	for _, typ := range nc.ReadyDependents() {
		nc.SetCondition(metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Resolved"})
	}
	if err := kube.Status().Update(t.Context(), nc); err != nil {
		t.Fatalf("status update rejected: %v", err)
	}
	got := &awsv1.EC2NodeClass{}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Role != "KarpenterNodeRole-test" {
		t.Errorf("spec.role = %q after a status update", got.Spec.Role)
	}
	cr := got.Status.CapacityReservations[0]
	if cr.ReservationType != awsv1.CapacityReservationTypeDefault || cr.State != awsv1.CapacityReservationStateActive {
		t.Errorf("capacity reservation defaulted to type %q, state %q; want default, active", cr.ReservationType, cr.State)
	}
	if !got.IsReady() || got.AMIFamily() != awsv1.AMIFamilyAL2023 {
		t.Errorf("read back: ready %v, family %q; want ready AL2023; conditions %+v", got.IsReady(), got.AMIFamily(), got.Status.Conditions)
	}
	if diff := cmp.Diff(nc.Status.AMIs, got.Status.AMIs); diff != "" {
		t.Errorf("status.amis (-sent +stored):\n%s", diff)
	}

	bad := got.DeepCopy()
	bad.Status.CapacityReservations[0].ReservationType = "spot-block"
	err = kube.Status().Update(t.Context(), bad)
	assertRejected(t, err, "status.capacityReservations[0].reservationType", `Unsupported value: "spot-block"`)
}

// The CRD's names, scope and columns are Karpenter's, so kubectl and scripts that
// use them keep working.
func TestEC2NodeClassCRD(t *testing.T) {
	crds, err := crd.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(crds, func(c *apiextensionsv1.CustomResourceDefinition) bool { return c.Spec.Names.Kind == "EC2NodeClass" })
	if i < 0 {
		t.Fatal("no EC2NodeClass CRD embedded")
	}
	c := crds[i]
	if c.Name != "ec2nodeclasses.karpenter.k8s.aws" || c.Spec.Group != awsv1.Group || c.Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("CRD %s, group %s, scope %s", c.Name, c.Spec.Group, c.Spec.Scope)
	}
	names := c.Spec.Names
	if names.Plural != "ec2nodeclasses" || names.Singular != "ec2nodeclass" || names.ListKind != "EC2NodeClassList" ||
		!slices.Equal(names.ShortNames, []string{"ec2nc", "ec2ncs"}) || !slices.Equal(names.Categories, []string{"karpenter"}) {
		t.Errorf("names %+v", names)
	}
	if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != "v1" || c.Spec.Versions[0].Subresources == nil || c.Spec.Versions[0].Subresources.Status == nil {
		t.Fatalf("versions %+v: want v1 only, with a status subresource", c.Spec.Versions)
	}
	type column struct {
		Name, Type, JSONPath string
		Priority             int32
	}
	var columns []column
	for _, col := range c.Spec.Versions[0].AdditionalPrinterColumns {
		columns = append(columns, column{col.Name, col.Type, col.JSONPath, col.Priority})
	}
	want := []column{
		{"Ready", "string", `.status.conditions[?(@.type=="Ready")].status`, 0},
		{"Age", "date", ".metadata.creationTimestamp", 0},
		{"Role", "string", ".spec.role", 1},
	}
	if diff := cmp.Diff(want, columns); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
}

// --- helpers ---

var invalidNameChars = regexp.MustCompile(`[^a-z0-9]+`)

func objectName(t *testing.T) string {
	name := strings.Trim(invalidNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 63 {
		name = strings.Trim(name[len(name)-63:], "-")
	}
	return name
}

// create creates a copy of obj with strict field validation, as kubectl does, and
// deletes it when the test ends. It returns what the server stored.
func create(t *testing.T, obj map[string]any) (*unstructured.Unstructured, error) {
	t.Helper()
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	if err := kube.Create(t.Context(), u, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), u) })
	return u, nil
}

// documents reads the YAML documents of a file, each decoded as the API server
// decodes JSON (integers stay integers).
func documents(t *testing.T, file string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if obj := decode(t, string(doc)); len(obj) > 0 {
			docs = append(docs, obj)
		}
	}
}

func decode(t *testing.T, text string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatalf("YAML %q: %v", text, err)
	}
	obj := map[string]any{}
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		t.Fatalf("YAML %q: %v", text, err)
	}
	return obj
}

// typed converts an object to T, failing on any field T does not know: the Go types
// must cover everything the API accepts.
func typed[T any](t *testing.T, obj map[string]any) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, out, true); err != nil {
		t.Fatalf("converting to %T: %v", out, err)
	}
	return out
}

var validators sync.Map // kind → *crd.Validator

// admitOffline runs the CRD's validation without a server, as tailor simulate does.
func admitOffline(t *testing.T, kind string, obj map[string]any) error {
	t.Helper()
	v, ok := validators.Load(kind)
	if !ok {
		nv, err := crd.NewValidator(kind)
		if err != nil {
			t.Fatal(err)
		}
		v, _ = validators.LoadOrStore(kind, nv)
	}
	return v.(*crd.Validator).Admit(t.Context(), runtime.DeepCopyJSON(obj))
}

// assertRejected checks that err is the API server's Invalid error and that one of
// its causes names field with message.
func assertRejected(t *testing.T, err error, field, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection of %s with %q", field, message)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("rejected with %v; want an Invalid error on %s", err, field)
	}
	status, _ := err.(apierrors.APIStatus)
	var causes []string
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, message) {
			return
		}
		causes = append(causes, fmt.Sprintf("%s: %s", c.Field, c.Message))
	}
	t.Errorf("rejected, but no cause is %s with %q; causes:\n  %s", field, message, strings.Join(causes, "\n  "))
}
