package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
)

// ParseOnDemandPrices reads the Price List API's product documents (GetProducts'
// PriceList) into hourly on-demand prices by instance type. Documents without an
// instance type or an hourly USD price are skipped; when a type has several, the
// lowest counts.
func ParseOnDemandPrices(priceList []string) (map[string]float64, error) {
	type doc struct {
		Product struct {
			Attributes struct {
				InstanceType string `json:"instanceType"`
			} `json:"attributes"`
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
	out := map[string]float64{}
	for i, raw := range priceList {
		var d doc
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			return nil, fmt.Errorf("price list document %d: %w", i, err)
		}
		name := d.Product.Attributes.InstanceType
		if name == "" {
			continue
		}
		for _, term := range d.Terms.OnDemand {
			for _, dim := range term.PriceDimensions {
				usd, ok := dim.PricePerUnit["USD"]
				if !ok || dim.Unit != "Hrs" {
					continue
				}
				p, err := strconv.ParseFloat(usd, 64)
				if err != nil {
					return nil, fmt.Errorf("price list document %d (%s): price %q: %w", i, name, usd, err)
				}
				// A zero price is a placeholder (a reserved or unsupported line), not free capacity.
				if have, ok := out[name]; p > 0 && (!ok || p < have) {
					out[name] = p
				}
			}
		}
	}
	return out, nil
}

// LatestSpotPrices keeps the newest price of each instance type and zone from a
// spot price history.
func LatestSpotPrices(history []ec2types.SpotPrice) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	at := map[[2]string]time.Time{}
	for _, h := range history {
		name, zone := string(h.InstanceType), deref(h.AvailabilityZone)
		if name == "" || zone == "" || h.SpotPrice == nil {
			continue
		}
		p, err := strconv.ParseFloat(*h.SpotPrice, 64)
		if err != nil {
			return nil, fmt.Errorf("spot price of %s in %s: %q: %w", name, zone, *h.SpotPrice, err)
		}
		key := [2]string{name, zone}
		ts := deref(h.Timestamp)
		if seen, ok := at[key]; ok && !ts.After(seen) {
			continue
		}
		at[key] = ts
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][zone] = p
	}
	return out, nil
}

// Over returns p's prices, with fallback's where p has none.
func (p Prices) Over(fallback Prices) Prices {
	out := Prices{OnDemand: maps.Clone(fallback.OnDemand), Spot: map[string]map[string]float64{}, Dedicated: maps.Clone(fallback.Dedicated)}
	if out.OnDemand == nil {
		out.OnDemand = map[string]float64{}
	}
	maps.Copy(out.OnDemand, p.OnDemand)
	if len(p.Dedicated) > 0 {
		if out.Dedicated == nil {
			out.Dedicated = map[string]float64{}
		}
		maps.Copy(out.Dedicated, p.Dedicated)
	}
	for name, zones := range fallback.Spot {
		out.Spot[name] = maps.Clone(zones)
	}
	for name, zones := range p.Spot {
		if out.Spot[name] == nil {
			out.Spot[name] = map[string]float64{}
		}
		maps.Copy(out.Spot[name], zones)
	}
	return out
}

// FallbackPrices are the region's embedded prices, for when the Pricing API or the
// spot price history cannot be read: the embedded catalog's (EC2 us-east-1), times
// the region's price ratio (see regions.go), with its zones renamed into region
// (us-east-1a → <region>a). A region without embedded prices is a
// NoEmbeddedPricesError.
func FallbackPrices(region string) (Prices, error) {
	ratio, ok := regionPriceRatio(region)
	if !ok {
		return Prices{}, &NoEmbeddedPricesError{Region: region}
	}
	return scaledPrices(region, ratio, 0)
}

// The operating systems nodes are priced for (their kubernetes.io/os).
const (
	OSLinux   = "linux"
	OSWindows = "windows"
)

// WindowsLicensePerVCPUHour is what EC2 adds to the Linux price, per vCPU and
// hour, for a licence-included Windows Server instance of most types (m5.large:
// $0.096 Linux, $0.188 Windows). The embedded fallback prices of Windows nodes
// are the Linux ones plus it: an estimate (burstable types pay less) until the
// Pricing API and the spot price history answer with Windows's own prices.
const WindowsLicensePerVCPUHour = 0.046

// osProducts are, by operating system, the Pricing API's operatingSystem and the
// spot price history's product description.
var osProducts = map[string]struct{ pricing, spot string }{
	OSLinux:   {"Linux", "Linux/UNIX"},
	OSWindows: {"Windows", "Windows"},
}

// scaledPrices are the embedded us-east-1 prices times ratio, in region, each plus
// perVCPU for every vCPU of the type.
func scaledPrices(region string, ratio, perVCPU float64) (Prices, error) {
	c, err := catalog.EmbeddedAWSUSEast1()
	if err != nil {
		return Prices{}, err
	}
	types, err := c.InstanceTypes(allocatable.Kwok{})
	if err != nil {
		return Prices{}, err
	}
	out := Prices{OnDemand: map[string]float64{}, Spot: map[string]map[string]float64{}}
	for _, it := range types {
		cpu := it.Capacity[corev1.ResourceCPU]
		license := perVCPU * float64(cpu.Value())
		for _, o := range it.Offerings {
			switch o.CapacityType {
			case CapacityTypeOnDemand:
				out.OnDemand[it.Name] = scalePrice(o.Price, ratio) + license
			case CapacityTypeSpot:
				if out.Spot[it.Name] == nil {
					out.Spot[it.Name] = map[string]float64{}
				}
				out.Spot[it.Name][region+o.Zone[len(o.Zone)-1:]] = scalePrice(o.Price, ratio) + license
			}
		}
	}
	return out, nil
}

// pricingAPI and spotAPI are the calls PriceBook makes.
type pricingAPI interface {
	GetProducts(ctx context.Context, in *pricing.GetProductsInput, opts ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

type spotAPI interface {
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, opts ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// PriceBook keeps the region's prices: the embedded catalog's until the Pricing API
// and the spot price history have been read, then theirs, refreshed every interval.
type PriceBook struct {
	region  string
	pricing pricingAPI
	ec2     spotAPI
	clock   clock.Clock
	// Spot prices move by the minute, on-demand ones a few times a year.
	onDemandEvery, spotEvery time.Duration
	// readTimeout bounds each read of one operating system's prices (see
	// priceReadTimeout).
	readTimeout time.Duration

	// warning, when set, is logged at Start: the region has no embedded prices.
	warning string

	// fallback and live are by operating system (OSLinux, OSWindows).
	mu       sync.RWMutex
	fallback map[string]Prices
	live     map[string]Prices
	// generation counts refreshes, so that what is built from prices can be kept
	// until they change.
	generation int64
}

// priceReadTimeout bounds one read of an operating system's on-demand or spot
// prices, all its pages. Start runs on the manager's context, which has no
// deadline: a Pricing API or spot price history that hangs would stop every
// refresh after it, leaving prices as they were for good. A read takes seconds
// (a region's on-demand products are some ten pages of the Price List API); one
// that runs out keeps the previous prices and is tried again at the next tick.
const priceReadTimeout = 2 * time.Minute

// NewPriceBook returns a price book for region; Start refreshes on-demand prices
// every onDemandEvery and spot prices every spotEvery. A region without embedded
// prices starts from us-east-1's (see FallbackWarning): the live prices replace
// them within the first refresh, and a wrong ranking until then is better than a
// controller that cannot start in a region newer than its build.
func NewPriceBook(region string, pricingClient pricingAPI, ec2Client spotAPI, clk clock.Clock, onDemandEvery, spotEvery time.Duration) (*PriceBook, error) {
	b := &PriceBook{region: region, pricing: pricingClient, ec2: ec2Client, clock: clk, onDemandEvery: onDemandEvery, spotEvery: spotEvery,
		readTimeout: priceReadTimeout, fallback: map[string]Prices{}, live: map[string]Prices{}}
	ratio, ok := regionPriceRatio(region)
	if !ok {
		b.warning = (&NoEmbeddedPricesError{Region: region}).Error() + "; until the Pricing API answers, instance types are ranked by us-east-1's prices"
		ratio = 1
	}
	for os, perVCPU := range map[string]float64{OSLinux: 0, OSWindows: WindowsLicensePerVCPUHour} {
		fallback, err := scaledPrices(region, ratio, perVCPU)
		if err != nil {
			return nil, fmt.Errorf("embedded prices: %w", err)
		}
		b.fallback[os] = fallback
	}
	return b, nil
}

// FallbackWarning says why the embedded prices are not the region's, or "".
func (b *PriceBook) FallbackWarning() string { return b.warning }

// Prices are the current prices of Linux nodes.
func (b *PriceBook) Prices() Prices { return b.PricesFor(OSLinux) }

// PricesFor are the current prices of nodes of the operating system (OSLinux,
// OSWindows).
func (b *PriceBook) PricesFor(os string) Prices {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.live[os].Over(b.fallback[os])
}

// Generation changes whenever the prices do.
func (b *PriceBook) Generation() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.generation
}

// Start refreshes the prices until ctx ends; a failed refresh keeps the prices it
// had and is tried again at the next tick.
func (b *PriceBook) Start(ctx context.Context) error {
	if b.warning != "" {
		log.FromContext(ctx).Info("warning: "+b.warning, "region", b.region)
	}
	var onDemandAt, spotAt time.Time
	tick := min(b.onDemandEvery, b.spotEvery)
	for {
		now := b.clock.Now()
		if onDemandAt.IsZero() || now.Sub(onDemandAt) >= b.onDemandEvery {
			if err := b.RefreshOnDemand(ctx); err != nil {
				log.FromContext(ctx).Error(err, "refreshing on-demand prices; keeping the previous ones")
			} else {
				onDemandAt = now
			}
		}
		if spotAt.IsZero() || now.Sub(spotAt) >= b.spotEvery {
			if err := b.RefreshSpot(ctx); err != nil {
				log.FromContext(ctx).Error(err, "refreshing spot prices; keeping the previous ones")
			} else {
				spotAt = now
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-b.clock.After(tick):
		}
	}
}

// Refresh reads on-demand and spot prices; each half read replaces the previous.
func (b *PriceBook) Refresh(ctx context.Context) error {
	return errors.Join(b.RefreshOnDemand(ctx), b.RefreshSpot(ctx))
}

// RefreshOnDemand reads the on-demand prices of each operating system from the
// Pricing API: shared tenancy, then dedicated (whose failure keeps the dedicated
// prices read before, and the shared ones just read).
func (b *PriceBook) RefreshOnDemand(ctx context.Context) error {
	return b.refresh(ctx, func(ctx context.Context, os string) (func(*Prices), error) {
		prices, err := b.onDemand(ctx, os, "Shared")
		if err != nil || len(prices) == 0 {
			return nil, err
		}
		dedicated, err := b.onDemand(ctx, os, "Dedicated")
		return func(p *Prices) {
			p.OnDemand = prices
			if err == nil && len(dedicated) > 0 {
				p.Dedicated = dedicated
			}
		}, err
	})
}

// RefreshSpot reads the spot prices in force of each operating system from the
// spot price history.
func (b *PriceBook) RefreshSpot(ctx context.Context) error {
	return b.refresh(ctx, func(ctx context.Context, os string) (func(*Prices), error) {
		prices, err := b.spot(ctx, os)
		if err != nil || len(prices) == 0 {
			return nil, err
		}
		return func(p *Prices) { p.Spot = prices }, nil
	})
}

// refresh reads each operating system's prices, each read within readTimeout,
// and applies what read returns to its live prices; a failed or empty read keeps
// the previous ones.
func (b *PriceBook) refresh(ctx context.Context, read func(ctx context.Context, os string) (func(*Prices), error)) error {
	var errs []error
	for _, os := range []string{OSLinux, OSWindows} {
		set, err := b.readWithin(ctx, os, read)
		if err != nil {
			errs = append(errs, err)
		}
		if set == nil {
			continue
		}
		b.mu.Lock()
		live := b.live[os]
		set(&live)
		b.live[os] = live
		b.generation++
		b.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (b *PriceBook) readWithin(ctx context.Context, os string, read func(ctx context.Context, os string) (func(*Prices), error)) (func(*Prices), error) {
	ctx, cancel := context.WithTimeout(ctx, b.readTimeout)
	defer cancel()
	return read(ctx, os)
}

// onDemand reads the on-demand prices of the operating system on hardware of the
// tenancy, as the Price List names it (Shared, Dedicated).
func (b *PriceBook) onDemand(ctx context.Context, os, tenancy string) (map[string]float64, error) {
	filter := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	in := &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: []pricingtypes.Filter{
		filter("regionCode", b.region), filter("operatingSystem", osProducts[os].pricing), filter("tenancy", tenancy),
		// Licence included for Windows ("No License required" is the Price List's
		// name for it), not bring-your-own.
		filter("preInstalledSw", "NA"), filter("capacitystatus", "Used"), filter("licenseModel", "No License required"),
	}}
	out := map[string]float64{}
	for p := pricing.NewGetProductsPaginator(b.pricing, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading %s on-demand prices (%s tenancy): %w", os, tenancy, err)
		}
		prices, err := ParseOnDemandPrices(page.PriceList)
		if err != nil {
			return nil, err
		}
		for name, price := range prices {
			if have, ok := out[name]; !ok || price < have {
				out[name] = price
			}
		}
	}
	return out, nil
}

func (b *PriceBook) spot(ctx context.Context, os string) (map[string]map[string]float64, error) {
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{osProducts[os].spot},
		// A start time of now asks for the price in force now, per type and zone.
		StartTime: aws.Time(b.clock.Now()),
	}
	var history []ec2types.SpotPrice
	for p := ec2.NewDescribeSpotPriceHistoryPaginator(b.ec2, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading %s spot prices: %w", os, err)
		}
		history = append(history, page.SpotPriceHistory...)
	}
	return LatestSpotPrices(history)
}
