package fakeaws

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

func TestSSMGetParameter(t *testing.T) {
	s := start(t, Options{})
	c := ssm.NewFromConfig(config(s, 3))
	for _, name := range []string{
		"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
		"/aws/service/bottlerocket/aws-k8s-1.34/x86_64/latest/image_id",
		"/aws/service/bottlerocket/aws-k8s-1.34-nvidia/arm64/latest/image_id",
	} {
		out := must(c.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String(name)})).ok(t)
		id := aws.ToString(out.Parameter.Value)
		if !strings.HasPrefix(id, "ami-") || aws.ToString(out.Parameter.DataType) != "aws:ec2:image" ||
			aws.ToString(out.Parameter.ARN) != "arn:aws:ssm:us-east-1::parameter"+name {
			t.Errorf("%s: %+v", name, out.Parameter)
		}
		// The alias names an image DescribeImages knows, of the right architecture.
		found := false
		for _, im := range s.inv.images {
			if im.ID == id {
				found = true
				if want := map[bool]string{true: "arm64", false: "x86_64"}[strings.Contains(name, "arm64")]; im.Architecture != want {
					t.Errorf("%s: image %s is %s", name, im.Name, im.Architecture)
				}
			}
		}
		if !found {
			t.Errorf("%s: no image %s", name, id)
		}
	}
	_, err := c.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.99/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if apiCode(err) != "ParameterNotFound" {
		t.Errorf("unknown parameter: %v", err)
	}
	s.SetSSMParameter("/tailor/custom", "ami-0custom")
	if out := must(c.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String("/tailor/custom")})).ok(t); aws.ToString(out.Parameter.Value) != "ami-0custom" {
		t.Errorf("set parameter: %+v", out.Parameter)
	}
}

func TestPricingGetProducts(t *testing.T) {
	s := start(t, Options{})
	c := pricing.NewFromConfig(config(s, 3))
	filters := []pricingtypes.Filter{
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("regionCode"), Value: aws.String("us-east-1")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("operatingSystem"), Value: aws.String("Linux")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("tenancy"), Value: aws.String("Shared")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("capacitystatus"), Value: aws.String("Used")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("preInstalledSw"), Value: aws.String("NA")},
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("marketoption"), Value: aws.String("OnDemand")},
	}
	prices := map[string]float64{}
	pages := 0
	p := pricing.NewGetProductsPaginator(c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: filters, FormatVersion: aws.String("aws_v1")})
	for p.HasMorePages() {
		pages++
		for _, doc := range must(p.NextPage(ctx(t))).ok(t).PriceList {
			// Read it as a provider would: product.attributes.instanceType and
			// terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD.
			var d struct {
				Product struct {
					Attributes map[string]string `json:"attributes"`
				} `json:"product"`
				Terms struct {
					OnDemand map[string]struct {
						PriceDimensions map[string]struct {
							Unit         string            `json:"unit"`
							PricePerUnit map[string]string `json:"pricePerUnit"`
						} `json:"priceDimensions"`
					} `json:"OnDemand"`
				} `json:"terms"`
			}
			if err := json.Unmarshal([]byte(doc), &d); err != nil {
				t.Fatalf("price document: %v\n%s", err, doc)
			}
			for _, term := range d.Terms.OnDemand {
				for _, dim := range term.PriceDimensions {
					v, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
					if err != nil || dim.Unit != "Hrs" {
						t.Fatalf("dimension %+v", dim)
					}
					prices[d.Product.Attributes["instanceType"]] = v
				}
			}
		}
	}
	if pages < 2 {
		t.Errorf("%d pages", pages)
	}
	if got, want := prices["m5.large"], s.inv.types["m5.large"].OnDemandPrice; got != want || want == 0 {
		t.Errorf("m5.large: %v, want %v", got, want)
	}
	if len(prices) < len(s.inv.typeNames)/2 {
		t.Errorf("only %d prices", len(prices))
	}
	one := must(c.GetProducts(ctx(t), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: append(filters,
		pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("instanceType"), Value: aws.String("c5.xlarge")})})).ok(t)
	if len(one.PriceList) != 1 || !strings.Contains(one.PriceList[0], `"BoxUsage:c5.xlarge"`) {
		t.Errorf("instanceType filter: %v", one.PriceList)
	}
	none := must(c.GetProducts(ctx(t), &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: []pricingtypes.Filter{
		{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String("regionCode"), Value: aws.String("eu-west-1")}}})).ok(t)
	if len(none.PriceList) != 0 {
		t.Errorf("another region: %d prices", len(none.PriceList))
	}
}

func TestEKSDescribeCluster(t *testing.T) {
	s := start(t, Options{Cluster: Cluster{Name: "prod", Version: "1.33"}})
	c := eks.NewFromConfig(config(s, 3))
	cl := must(c.DescribeCluster(ctx(t), &eks.DescribeClusterInput{Name: aws.String("prod")})).ok(t).Cluster
	if aws.ToString(cl.Name) != "prod" || aws.ToString(cl.Version) != "1.33" || !strings.HasPrefix(aws.ToString(cl.Endpoint), "https://") ||
		aws.ToString(cl.KubernetesNetworkConfig.ServiceIpv4Cidr) != "10.100.0.0/16" || cl.Status != ekstypes.ClusterStatusActive ||
		cl.CreatedAt == nil || aws.ToString(cl.ResourcesVpcConfig.ClusterSecurityGroupId) == "" {
		t.Fatalf("cluster %+v", cl)
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(cl.CertificateAuthority.Data))
	if block, _ := pem.Decode(ca); err != nil || block == nil || block.Type != "CERTIFICATE" {
		t.Errorf("CA is not a base64 PEM certificate: %v", err)
	}
	if _, err := c.DescribeCluster(ctx(t), &eks.DescribeClusterInput{Name: aws.String("dev")}); apiCode(err) != "ResourceNotFoundException" {
		t.Errorf("unknown cluster: %v", err)
	}
}

func TestIAMInstanceProfiles(t *testing.T) {
	s := start(t, Options{})
	c := iam.NewFromConfig(config(s, 3))
	got := must(c.GetInstanceProfile(ctx(t), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("KarpenterNodeInstanceProfile-tailor")})).ok(t)
	if len(got.InstanceProfile.Roles) != 1 || aws.ToString(got.InstanceProfile.Roles[0].RoleName) != "KarpenterNodeRole-tailor" {
		t.Fatalf("default profile %+v", got.InstanceProfile)
	}

	name := aws.String("tailor_default_123")
	created := must(c.CreateInstanceProfile(ctx(t), &iam.CreateInstanceProfileInput{InstanceProfileName: name, Path: aws.String("/karpenter/us-east-1/tailor/"),
		Tags: []iamtypes.Tag{{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}}})).ok(t)
	if arn := aws.ToString(created.InstanceProfile.Arn); arn != "arn:aws:iam::123456789012:instance-profile/karpenter/us-east-1/tailor/tailor_default_123" {
		t.Errorf("ARN %s", arn)
	}
	if _, err := c.CreateInstanceProfile(ctx(t), &iam.CreateInstanceProfileInput{InstanceProfileName: name}); apiCode(err) != "EntityAlreadyExists" {
		t.Errorf("create twice: %v", err)
	}
	must(c.AddRoleToInstanceProfile(ctx(t), &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("KarpenterNodeRole-tailor")})).ok(t)
	if _, err := c.AddRoleToInstanceProfile(ctx(t), &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("KarpenterNodeRole-tailor")}); apiCode(err) != "LimitExceeded" {
		t.Errorf("second role: %v", err)
	}
	if _, err := c.AddRoleToInstanceProfile(ctx(t), &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("nope"), RoleName: aws.String("KarpenterNodeRole-tailor")}); apiCode(err) != "NoSuchEntity" {
		t.Errorf("unknown profile: %v", err)
	}
	got = must(c.GetInstanceProfile(ctx(t), &iam.GetInstanceProfileInput{InstanceProfileName: name})).ok(t)
	if len(got.InstanceProfile.Roles) != 1 || len(got.InstanceProfile.Tags) != 1 {
		t.Errorf("after AddRole: %+v", got.InstanceProfile)
	}
	list := must(c.ListInstanceProfiles(ctx(t), &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/karpenter/")})).ok(t)
	if len(list.InstanceProfiles) != 1 || list.IsTruncated {
		t.Errorf("list by path: %+v", list.InstanceProfiles)
	}
	if _, err := c.DeleteInstanceProfile(ctx(t), &iam.DeleteInstanceProfileInput{InstanceProfileName: name}); apiCode(err) != "DeleteConflict" {
		t.Errorf("delete with a role: %v", err)
	}
	must(c.RemoveRoleFromInstanceProfile(ctx(t), &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String("KarpenterNodeRole-tailor")})).ok(t)
	must(c.DeleteInstanceProfile(ctx(t), &iam.DeleteInstanceProfileInput{InstanceProfileName: name})).ok(t)
	if _, err := c.GetInstanceProfile(ctx(t), &iam.GetInstanceProfileInput{InstanceProfileName: name}); apiCode(err) != "NoSuchEntity" {
		t.Errorf("after delete: %v", err)
	}
}

func sqsClient(s *Server) *sqs.Client { return sqs.NewFromConfig(config(s, 3)) }

func TestSQS(t *testing.T) {
	s, clk := startClocked(t, Options{MaxReceiveWait: 100 * time.Millisecond})
	c := sqsClient(s)
	url := must(c.GetQueueUrl(ctx(t), &sqs.GetQueueUrlInput{QueueName: aws.String("tailor")})).ok(t).QueueUrl
	if aws.ToString(url) != s.QueueURL("tailor") {
		t.Fatalf("queue URL %s, want %s", aws.ToString(url), s.QueueURL("tailor"))
	}
	if _, err := c.GetQueueUrl(ctx(t), &sqs.GetQueueUrlInput{QueueName: aws.String("nope")}); apiCode(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("unknown queue: %v", err)
	}
	other := must(c.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("other"), Attributes: map[string]string{"VisibilityTimeout": "10"}})).ok(t).QueueUrl

	// An empty long poll returns after MaxReceiveWait, empty.
	empty := must(c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: other, WaitTimeSeconds: 20})).ok(t)
	if len(empty.Messages) != 0 {
		t.Fatalf("empty queue: %+v", empty.Messages)
	}
	// A long poll wakes when a message arrives.
	done := make(chan *sqs.ReceiveMessageOutput)
	go func() {
		out, _ := c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: other, WaitTimeSeconds: 20, MaxNumberOfMessages: 10})
		done <- out
	}()
	must(c.SendMessage(ctx(t), &sqs.SendMessageInput{QueueUrl: other, MessageBody: aws.String(`{"hello":"world"}`)})).ok(t)
	got := <-done
	if got == nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != `{"hello":"world"}` {
		t.Fatalf("long poll: %+v", got)
	}
	// In flight until the visibility timeout passes, then delivered again.
	if again := must(c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: other})).ok(t); len(again.Messages) != 0 {
		t.Fatalf("in-flight message delivered again")
	}
	attrs := must(c.GetQueueAttributes(ctx(t), &sqs.GetQueueAttributesInput{QueueUrl: other, AttributeNames: []sqstypes.QueueAttributeName{"All"}})).ok(t).Attributes
	if attrs["ApproximateNumberOfMessagesNotVisible"] != "1" || attrs["VisibilityTimeout"] != "10" || attrs["QueueArn"] != "arn:aws:sqs:us-east-1:123456789012:other" {
		t.Errorf("attributes %v", attrs)
	}
	clk.Step(10 * time.Second)
	again := must(c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: other, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"ApproximateReceiveCount"}})).ok(t)
	if len(again.Messages) != 1 || again.Messages[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("after the visibility timeout: %+v", again.Messages)
	}
	must(c.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: other, ReceiptHandle: again.Messages[0].ReceiptHandle})).ok(t)
	if n := s.QueueDepth("other"); n != 0 {
		t.Errorf("%d messages after delete", n)
	}
	if _, err := c.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: other, ReceiptHandle: aws.String("garbage")}); apiCode(err) != "ReceiptHandleIsInvalid" {
		t.Errorf("bad receipt handle: %v", err)
	}
	s.ThrottleNext("sqs:ReceiveMessage", 1)
	must(c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: other})).ok(t)
	if n := s.Calls("sqs:ReceiveMessage"); n < 2 {
		t.Errorf("throttled receive not retried: %d calls", n)
	}
}
