package fakeaws

import (
	_ "embed"
	"encoding/json"
	"sync"
)

// vpcLimitsJSON is AWS's own table of per-type network limits, as its VPC resource
// controller ships it (github.com/aws/amazon-vpc-resource-controller-k8s
// pkg/aws/vpc, v1.8.2): written by `bin/eks-node-referee vpc-limits >
// internal/fakeaws/vpclimits.json`. DescribeInstanceTypes serves these facts, not
// numbers derived from Tailor's catalog.
//
//go:embed vpclimits.json
var vpcLimitsJSON []byte

// vpcLimits is one type's row.
type vpcLimits struct {
	Interfaces       int32   `json:"interfaces"`
	IPv4PerInterface int32   `json:"ipv4PerInterface"`
	DefaultCard      int32   `json:"defaultCard"`
	Cards            []int32 `json:"cards"` // maximum interfaces, by card index
	BranchInterfaces int32   `json:"branchInterfaces"`
	Hypervisor       string  `json:"hypervisor"`
	BareMetal        bool    `json:"bareMetal"`
}

var awsVPCLimits = sync.OnceValue(func() map[string]vpcLimits {
	m := map[string]vpcLimits{}
	if err := json.Unmarshal(vpcLimitsJSON, &m); err != nil {
		panic("fakeaws: vpclimits.json: " + err.Error())
	}
	return m
})
