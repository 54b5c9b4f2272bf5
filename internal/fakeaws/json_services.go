package fakeaws

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// SSM, the Price List API (JSON 1.1) and EKS (REST-JSON).

func (s *Server) serveSSM(w http.ResponseWriter, c *call) error {
	var out any
	var err error
	switch c.action {
	case "GetParameter":
		out, err = s.ssmGetParameter(c.body)
	case "GetParameters":
		out, err = s.ssmGetParameters(c.body)
	default:
		return badRequest("UnknownOperationException", "fakeaws does not serve SSM %s", c.action)
	}
	if err != nil {
		return err
	}
	w.Header().Set("X-Amzn-RequestId", c.reqID)
	writeJSON(w, http.StatusOK, "application/x-amz-json-1.1", out)
	return nil
}

type ssmParameter struct {
	Name             string
	Type             string
	Value            string
	Version          int
	LastModifiedDate float64
	ARN              string
	DataType         string
}

func (s *Server) ssmParameterLocked(name string) (ssmParameter, bool) {
	v, ok := s.inv.ssm[name]
	if !ok {
		return ssmParameter{}, false
	}
	// Public parameters (/aws/service/…) have no account in their ARN.
	account := s.opts.AccountID
	if strings.HasPrefix(name, "/aws/") {
		account = ""
	}
	p := ssmParameter{
		Name: name, Type: "String", Value: v, Version: 1, LastModifiedDate: epochSeconds(s.inv.ssmModifiedAt),
		ARN: fmt.Sprintf("arn:aws:ssm:%s:%s:parameter%s", s.opts.Region, account, name), DataType: "text",
	}
	if strings.HasPrefix(v, "ami-") {
		p.DataType = "aws:ec2:image"
	}
	return p, true
}

func (s *Server) ssmGetParameter(body []byte) (any, error) {
	var in struct {
		Name           string
		WithDecryption *bool
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.ssmParameterLocked(in.Name)
	if !ok {
		return nil, badRequest("ParameterNotFound", "")
	}
	return map[string]any{"Parameter": p}, nil
}

func (s *Server) ssmGetParameters(body []byte) (any, error) {
	var in struct {
		Names          []string
		WithDecryption *bool
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	found, invalid := []ssmParameter{}, []string{}
	for _, n := range in.Names {
		if p, ok := s.ssmParameterLocked(n); ok {
			found = append(found, p)
		} else {
			invalid = append(invalid, n)
		}
	}
	return map[string]any{"Parameters": found, "InvalidParameters": invalid}, nil
}

// SetSSMParameter sets (or, with an empty value, deletes) a parameter, such as an
// AMI alias moving to a new release.
func (s *Server) SetSSMParameter(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == "" {
		delete(s.inv.ssm, name)
	} else {
		s.inv.ssm[name] = value
	}
	s.inv.ssmModifiedAt = s.now()
}

// SSMParameter reads a parameter.
func (s *Server) SSMParameter(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.inv.ssm[name]
	return v, ok
}

// Price List API.

func (s *Server) servePricing(w http.ResponseWriter, c *call) error {
	if c.action != "GetProducts" {
		return badRequest("UnknownOperationException", "fakeaws does not serve the Price List API's %s", c.action)
	}
	var in struct {
		ServiceCode   string
		Filters       []struct{ Type, Field, Value string }
		FormatVersion string
		NextToken     string
		MaxResults    *int
	}
	if err := decodeJSON(c.body, &in); err != nil {
		return err
	}
	if in.ServiceCode != "AmazonEC2" {
		return badRequest("InvalidParameterException", "fakeaws prices only AmazonEC2, not %q", in.ServiceCode)
	}
	if in.FormatVersion != "" && in.FormatVersion != "aws_v1" {
		return badRequest("InvalidParameterException", "Invalid FormatVersion %q", in.FormatVersion)
	}
	limit := 100
	if in.MaxResults != nil {
		if limit = *in.MaxResults; limit < 1 || limit > 100 {
			return badRequest("InvalidParameterException", "MaxResults must be between 1 and 100")
		}
	}
	offset, err := decodeToken(in.NextToken)
	if err != nil {
		return badRequest("InvalidNextTokenException", "Invalid NextToken")
	}
	s.mu.Lock()
	var docs []map[string]any
	for _, n := range s.inv.typeNames {
		t := s.inv.types[n]
		if t.OnDemandPrice == 0 {
			continue
		}
		for _, os := range []string{"Linux", "Windows", "Linux/Dedicated", "Windows/Dedicated"} {
			os, dedicated := strings.CutSuffix(os, "/Dedicated")
			if dedicated && t.dedicatedPrice() == 0 {
				continue
			}
			doc := s.priceDocument(t, os, dedicated)
			attrs := doc["product"].(map[string]any)["attributes"].(map[string]string)
			ok := true
			for _, f := range in.Filters {
				if !priceFilterMatches(f.Type, attrs[f.Field], f.Value) {
					ok = false
					break
				}
			}
			if ok {
				docs = append(docs, doc)
			}
		}
	}
	s.mu.Unlock()
	page, next := cut(docs, offset, limit)
	list := make([]string, 0, len(page))
	for _, d := range page {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		list = append(list, string(b))
	}
	out := map[string]any{"FormatVersion": "aws_v1", "PriceList": list}
	if next != "" {
		out["NextToken"] = next
	}
	w.Header().Set("X-Amzn-RequestId", c.reqID)
	writeJSON(w, http.StatusOK, "application/x-amz-json-1.1", out)
	return nil
}

func priceFilterMatches(kind, have, want string) bool {
	switch kind {
	case "TERM_MATCH", "EQUALS":
		return strings.EqualFold(have, want)
	case "CONTAINS":
		return strings.Contains(strings.ToLower(have), strings.ToLower(want))
	case "ANY_OF":
		return slices.ContainsFunc(strings.Split(want, ","), func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), have) })
	case "NONE_OF":
		return !slices.ContainsFunc(strings.Split(want, ","), func(v string) bool { return strings.EqualFold(strings.TrimSpace(v), have) })
	}
	return false
}

// regionNames are the Price List's location names.
var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-1": "US West (N. California)",
	"us-west-2": "US West (Oregon)", "eu-west-1": "EU (Ireland)", "eu-central-1": "EU (Frankfurt)",
	"ap-southeast-1": "Asia Pacific (Singapore)", "ap-southeast-2": "Asia Pacific (Sydney)", "ap-northeast-1": "Asia Pacific (Tokyo)",
}

// onDemandTerm and hourlyRate are the Price List's codes of the on-demand offer
// term and its hourly rate, the same in every on-demand price.
const (
	onDemandTerm = "JRTCKXETXF"
	hourlyRate   = "6YS6EN2CT7"
)

// windowsLicensePerVCPU is what EC2 adds to a Linux price per vCPU-hour for a
// licence-included Windows instance (m5.large: $0.096 Linux, $0.188 Windows).
const windowsLicensePerVCPU = 0.046

// osPrice is a type's on-demand or spot Linux price for the operating system.
func osPrice(t *instanceType, linux float64, os string) float64 {
	if os == "Windows" {
		return linux + windowsLicensePerVCPU*float64(t.VCPUs)
	}
	return linux
}

// priceDocument is a type's shared-tenancy, licence-included on-demand price on
// the operating system (Linux or Windows) as GetProducts returns it.
//
// With dedicated, it is the type's price on dedicated hardware (tenancy
// Dedicated, usage type DedicatedUsage).
func (s *Server) priceDocument(t *instanceType, os string, dedicated bool) map[string]any {
	tenancy, usage, linux := "Shared", "BoxUsage:", t.OnDemandPrice
	if dedicated {
		tenancy, usage, linux = "Dedicated", "DedicatedUsage:", t.dedicatedPrice()
	}
	key := s.opts.Region + "/" + t.Name + "/" + os
	if dedicated {
		key += "/" + tenancy
	}
	sku := strings.ToUpper(strings.ReplaceAll(stableID("sku", key)[5:], "0", "Q"))[:16]
	hourly := osPrice(t, linux, os)
	price := strconv.FormatFloat(hourly, 'f', 10, 64)
	attrs := map[string]string{
		"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud", "instanceType": t.Name,
		"instanceFamily": familyName(t.Category), "regionCode": s.opts.Region, "location": cmp.Or(regionNames[s.opts.Region], s.opts.Region),
		"locationType": "AWS Region", "operatingSystem": os, "tenancy": tenancy, "preInstalledSw": "NA",
		"licenseModel": "No License required", "capacitystatus": "Used", "marketoption": "OnDemand", "operation": "RunInstances",
		"usagetype": usage + t.Name, "vcpu": strconv.Itoa(int(t.VCPUs)),
		"memory":            strconv.FormatFloat(float64(t.MemoryMiB)/1024, 'f', -1, 64) + " GiB",
		"currentGeneration": map[bool]string{true: "Yes", false: "No"}[t.CurrentGeneration],
		"physicalProcessor": t.Manufacturer, "processorArchitecture": "64-bit",
		"networkPerformance": "Up to 10 Gigabit", "storage": "EBS only",
	}
	if t.GPU.Count > 0 {
		attrs["gpu"] = strconv.Itoa(int(t.GPU.Count))
	}
	offer := sku + "." + onDemandTerm
	rate := offer + "." + hourlyRate
	return map[string]any{
		"product":     map[string]any{"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{"OnDemand": map[string]any{offer: map[string]any{
			"priceDimensions": map[string]any{rate: map[string]any{
				"unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": []string{}, "rateCode": rate,
				"description":  fmt.Sprintf("$%s per On Demand %s %s Instance Hour", strconv.FormatFloat(hourly, 'f', -1, 64), os, t.Name),
				"pricePerUnit": map[string]string{"USD": price},
			}},
			"sku": sku, "effectiveDate": "2025-11-01T00:00:00Z", "offerTermCode": onDemandTerm, "termAttributes": map[string]string{},
		}}},
		"version":         "20251101000000",
		"publicationDate": "2025-11-01T00:00:00Z",
	}
}

func familyName(category string) string {
	switch category {
	case "c":
		return "Compute optimized"
	case "r", "x", "z", "u":
		return "Memory optimized"
	case "i", "d", "h", "im", "is":
		return "Storage optimized"
	case "g", "p", "inf", "trn", "dl", "f", "gr", "vt":
		return "GPU instance"
	}
	return "General purpose"
}

// SetOnDemandPrice changes a type's on-demand price, as the Price List would
// publish it.
func (s *Server) SetOnDemandPrice(instanceType string, price float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.inv.types[instanceType]; t != nil {
		t.OnDemandPrice = price
	}
}

// EKS.

func (s *Server) serveEKS(w http.ResponseWriter, c *call) error {
	name := strings.TrimPrefix(c.path, "/clusters/")
	s.mu.Lock()
	cl := s.inv.cluster
	var subnets []string
	for _, sn := range s.inv.subnets {
		if !sn.MapPublicIP {
			subnets = append(subnets, sn.ID)
		}
	}
	var clusterSG string
	for _, g := range s.inv.sgs {
		if g.Tags["aws:eks:cluster-name"] == cl.Name {
			clusterSG = g.ID
		}
	}
	vpc := s.inv.vpcID
	s.mu.Unlock()
	if name != cl.Name {
		return errorf(http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: %s.", name)
	}
	out := map[string]any{"cluster": map[string]any{
		"name":      cl.Name,
		"arn":       fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", s.opts.Region, s.opts.AccountID, cl.Name),
		"createdAt": epochSeconds(cl.CreatedAt),
		"version":   cl.Version,
		"endpoint":  cl.Endpoint,
		"roleArn":   fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster-role", s.opts.AccountID, cl.Name),
		"resourcesVpcConfig": map[string]any{
			"subnetIds": subnets, "securityGroupIds": []string{}, "clusterSecurityGroupId": clusterSG, "vpcId": vpc,
			"endpointPublicAccess": true, "endpointPrivateAccess": true, "publicAccessCidrs": []string{"0.0.0.0/0"},
		},
		"kubernetesNetworkConfig": cl.networkConfig(),
		"logging":                 map[string]any{"clusterLogging": []any{}},
		"identity":                map[string]any{"oidc": map[string]any{"issuer": fmt.Sprintf("https://oidc.eks.%s.amazonaws.com/id/%016X", s.opts.Region, fnvHash(cl.Name))}},
		"status":                  "ACTIVE",
		"certificateAuthority":    map[string]any{"data": cl.CertificateAuthority},
		"platformVersion":         cl.PlatformVersion,
		"tags":                    map[string]string{},
		"accessConfig":            map[string]any{"authenticationMode": "API_AND_CONFIG_MAP"},
	}}
	w.Header().Set("X-Amzn-RequestId", c.reqID)
	writeJSON(w, http.StatusOK, "application/json", out)
	return nil
}

// Cluster is the EKS cluster the server describes.
func (s *Server) Cluster() Cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inv.cluster
}

// InventorySnapshot returns the subnets, security groups, images and SSM
// parameters the server holds, for tests to pick IDs from.
func (s *Server) InventorySnapshot() Inventory {
	s.mu.Lock()
	defer s.mu.Unlock()
	inv := Inventory{VPCID: s.inv.vpcID, SSMParameters: maps.Clone(s.inv.ssm)}
	for _, sn := range s.inv.subnets {
		c := *sn
		c.Tags = cloneTags(sn.Tags)
		inv.Subnets = append(inv.Subnets, c)
	}
	for _, g := range s.inv.sgs {
		c := *g
		c.Tags = cloneTags(g.Tags)
		inv.SecurityGroups = append(inv.SecurityGroups, c)
	}
	for _, im := range s.inv.images {
		c := *im
		c.Tags = cloneTags(im.Tags)
		inv.Images = append(inv.Images, c)
	}
	for _, name := range slices.Sorted(maps.Keys(s.inv.roles)) {
		inv.Roles = append(inv.Roles, s.inv.roles[name].Role)
	}
	for _, name := range slices.Sorted(maps.Keys(s.inv.profiles)) {
		p := s.inv.profiles[name].InstanceProfile
		p.Roles = slices.Clone(p.Roles)
		p.Tags = cloneTags(p.Tags)
		inv.InstanceProfiles = append(inv.InstanceProfiles, p)
	}
	for _, r := range s.inv.reservations {
		c := *r
		c.Tags = cloneTags(r.Tags)
		inv.CapacityReservations = append(inv.CapacityReservations, c)
	}
	return inv
}
