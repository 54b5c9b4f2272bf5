package aws

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Embedded fallback prices outside us-east-1.
//
// Tailor embeds one price list, EC2's us-east-1 (public on-demand Linux prices,
// estimated spot prices). Other regions' fallback prices are derived from it: each
// price times the region's price ratio to us-east-1, which is the public on-demand
// Linux price of m5.large in that region over its $0.096 in us-east-1. EC2's
// regional markups are close to uniform across families, so this is within a few
// per cent of the region's own list for most types; it only has to rank instance
// types until the Price List API and the spot price history answer (the price book
// reads them at start). Regions not listed here fall back to us-east-1's prices,
// with a warning logged when the price book starts.

// baseRegion is the region whose prices are embedded.
const baseRegion = "us-east-1"

// m5LargeOnDemand is the on-demand Linux price of m5.large (USD per hour) in the
// commercial regions Tailor has fallback prices for.
var m5LargeOnDemand = map[string]float64{
	"us-east-1":      0.096,
	"us-east-2":      0.096,
	"us-west-1":      0.112,
	"us-west-2":      0.096,
	"ca-central-1":   0.107,
	"ca-west-1":      0.107,
	"sa-east-1":      0.153,
	"eu-west-1":      0.107,
	"eu-west-2":      0.111,
	"eu-west-3":      0.112,
	"eu-central-1":   0.115,
	"eu-central-2":   0.127,
	"eu-north-1":     0.102,
	"eu-south-1":     0.112,
	"eu-south-2":     0.107,
	"me-south-1":     0.118,
	"af-south-1":     0.127,
	"ap-east-1":      0.132,
	"ap-south-1":     0.101,
	"ap-south-2":     0.101,
	"ap-southeast-1": 0.120,
	"ap-southeast-2": 0.120,
	"ap-southeast-3": 0.120,
	"ap-southeast-4": 0.120,
	"ap-northeast-1": 0.124,
	"ap-northeast-2": 0.118,
	"ap-northeast-3": 0.124,
}

// EmbeddedPriceRegions are the regions with embedded fallback prices, sorted.
func EmbeddedPriceRegions() []string { return slices.Sorted(maps.Keys(m5LargeOnDemand)) }

// NoEmbeddedPricesError is FallbackPrices' answer for a region without embedded
// prices.
type NoEmbeddedPricesError struct{ Region string }

func (e *NoEmbeddedPricesError) Error() string {
	return fmt.Sprintf("no embedded EC2 prices for region %s (Tailor has them for %s)", e.Region, strings.Join(EmbeddedPriceRegions(), ", "))
}

// regionPriceRatio is the region's prices over us-east-1's.
func regionPriceRatio(region string) (float64, bool) {
	p, ok := m5LargeOnDemand[region]
	return p / m5LargeOnDemand[baseRegion], ok
}

// scalePrice keeps a derived price to the Price List API's precision, so that
// us-east-1's own prices come out unchanged.
func scalePrice(p, ratio float64) float64 {
	return math.Round(p*ratio*1e6) / 1e6
}
