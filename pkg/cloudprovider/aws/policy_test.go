package aws

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodetailor/tailor/internal/fakeaws"
)

// The IAM documents shipped in docs/aws are what a user applies on a real account.
const policyDir = "../../../docs/aws"

type iamDocument struct {
	Version   string
	Id        string
	Statement []struct {
		Sid       string
		Effect    string
		Principal any
		Action    json.RawMessage
		Resource  any
		Condition map[string]map[string]any
	}
}

// actions reads an IAM policy document and returns every action it allows.
func readPolicy(t *testing.T, name string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(policyDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var doc iamDocument
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if doc.Version != "2012-10-17" || len(doc.Statement) == 0 {
		t.Fatalf("%s: version %q, %d statements", name, doc.Version, len(doc.Statement))
	}
	allowed := map[string]bool{}
	for i, s := range doc.Statement {
		if s.Effect != "Allow" && s.Effect != "Deny" {
			t.Errorf("%s: statement %d (%s): Effect %q", name, i, s.Sid, s.Effect)
		}
		var list []string
		if err := json.Unmarshal(s.Action, &list); err != nil {
			var one string
			if err := json.Unmarshal(s.Action, &one); err != nil {
				t.Errorf("%s: statement %d (%s): Action is neither a string nor a list: %s", name, i, s.Sid, s.Action)
			}
			list = []string{one}
		}
		for _, a := range list {
			if !regexp.MustCompile(`^[a-z0-9-]+:(\*|[A-Za-z]+\*?)$`).MatchString(a) {
				t.Errorf("%s: statement %d (%s): action %q is not service:Action", name, i, s.Sid, a)
			}
			if s.Effect == "Allow" {
				allowed[a] = true
			}
		}
	}
	return allowed
}

func TestPolicyDocumentsParse(t *testing.T) {
	for _, name := range []string{"controller-policy.json", "node-role-trust-policy.json", "interruption-queue-policy.json"} {
		readPolicy(t, name)
	}
	if got := readPolicy(t, "node-role-trust-policy.json"); !got["sts:AssumeRole"] {
		t.Errorf("node role trust policy does not allow sts:AssumeRole: %v", got)
	}
	if got := readPolicy(t, "interruption-queue-policy.json"); !got["sqs:SendMessage"] {
		t.Errorf("interruption queue policy does not let EventBridge send: %v", got)
	}

	var node struct{ ManagedPolicyArns []string }
	readJSON(t, "node-role-policy.json", &node)
	for _, want := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"} {
		if !slices.Contains(node.ManagedPolicyArns, "arn:aws:iam::aws:policy/"+want) {
			t.Errorf("node-role-policy.json lacks %s: %v", want, node.ManagedPolicyArns)
		}
	}

	// The EventBridge rules deliver exactly the events the queue reader handles.
	var rules map[string]struct {
		Source     []string `json:"source"`
		DetailType []string `json:"detail-type"`
	}
	readJSON(t, "interruption-rules.json", &rules)
	var got []string
	for name, r := range rules {
		if len(r.Source) != 1 || len(r.DetailType) != 1 {
			t.Fatalf("rule %s: want one source and one detail-type, got %+v", name, r)
		}
		got = append(got, r.Source[0]+"/"+r.DetailType[0])
	}
	slices.Sort(got)
	want := []string{"aws.ec2/" + fakeaws.DetailRebalance, "aws.ec2/" + fakeaws.DetailSpotInterruption,
		"aws.ec2/" + fakeaws.DetailStateChange, "aws.health/" + fakeaws.DetailHealth,
		"aws.ec2/" + fakeaws.DetailCapacityReservationInterruption}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("interruption rules match %v, want %v", got, want)
	}
}

func readJSON(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(policyDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// Every AWS API operation the provider's code calls is allowed by the controller
// policy: calls of a client method, and paginators (ec2.NewDescribeSubnetsPaginator).
func TestControllerPolicyCoversCalls(t *testing.T) {
	allowed := readPolicy(t, "controller-policy.json")
	// The operations of each client, by the IAM service prefix.
	clients := map[string]reflect.Type{
		"ec2": reflect.TypeOf(&ec2.Client{}), "eks": reflect.TypeOf(&eks.Client{}), "iam": reflect.TypeOf(&iam.Client{}),
		"pricing": reflect.TypeOf(&pricing.Client{}), "sqs": reflect.TypeOf(&sqs.Client{}), "ssm": reflect.TypeOf(&ssm.Client{}),
	}
	servicesOf := map[string][]string{} // operation → services that have it
	for svc, typ := range clients {
		for i := range typ.NumMethod() {
			if name := typ.Method(i).Name; name != "Options" {
				servicesOf[name] = append(servicesOf[name], svc)
			}
		}
	}

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	paginator := regexp.MustCompile(`^New([A-Za-z]+)Paginator$`)
	called := map[string][]string{} // operation → candidate services
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		sdkImports := map[string]string{} // local name → service
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			svc, ok := strings.CutPrefix(p, "github.com/aws/aws-sdk-go-v2/service/")
			if !ok || clients[svc] == nil {
				continue
			}
			local := path.Base(p)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			sdkImports[local] = svc
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && sdkImports[pkg.Name] != "" {
				if m := paginator.FindStringSubmatch(sel.Sel.Name); m != nil {
					called[m[1]] = []string{sdkImports[pkg.Name]}
				}
				return true
			}
			if svcs := servicesOf[sel.Sel.Name]; len(svcs) > 0 && called[sel.Sel.Name] == nil {
				called[sel.Sel.Name] = svcs
			}
			return true
		})
	}
	for _, must := range []string{"CreateFleet", "DescribeSubnets", "GetProducts", "ReceiveMessage", "DeleteMessage", "GetParameters"} {
		if called[must] == nil {
			t.Errorf("the scan found no call of %s: it is broken", must)
		}
	}
	for op, svcs := range called {
		ok := false
		for _, svc := range svcs {
			ok = ok || allowed[svc+":"+op] || allowed[svc+":*"]
		}
		if !ok {
			t.Errorf("the provider calls %s (%s) but docs/aws/controller-policy.json does not allow it", op, strings.Join(svcs, " or "))
		}
	}
}
