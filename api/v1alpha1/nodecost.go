package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
)

// PerNodeCostAnnotationKey, on a NodePool, is what each of its nodes costs per
// hour besides what the cloud bills (licences, agents, support), in the currency
// of the instance prices, as a plain decimal ("0.02"). The scheduling engine adds
// it to every new node's price, so it weighs fewer, larger nodes against many
// small ones; disruption counts it as saved when a node goes.
const PerNodeCostAnnotationKey = Group + "/per-node-cost"

// PerNodeCostPattern is the form a per-node cost takes: up to four digits, then
// optionally a point and up to nine.
const PerNodeCostPattern = `^[0-9]{1,4}(\.[0-9]{1,9})?$`

var perNodeCostPattern = regexp.MustCompile(PerNodeCostPattern)

// ParsePerNodeCost reads a per-node cost: a plain decimal under 10,000 (a
// figure of five digits is a monthly cost or cents, not dollars an hour).
func ParsePerNodeCost(s string) (float64, error) {
	if !perNodeCostPattern.MatchString(s) {
		return 0, fmt.Errorf("%q is not a per-hour cost: want a plain decimal such as 0.02", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a per-hour cost: %w", s, err)
	}
	return v, nil
}
