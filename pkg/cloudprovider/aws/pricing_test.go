package aws

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestParseOnDemandPrices(t *testing.T) {
	doc := func(name, unit, usd string) string {
		return `{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":"` + name + `","regionCode":"us-east-1"}},` +
			`"terms":{"OnDemand":{"A.JRTCKXETXF":{"priceDimensions":{"A.JRTCKXETXF.6YS6EN2CT7":{"unit":"` + unit + `","pricePerUnit":{"USD":"` + usd + `"}}}}}}}`
	}
	tests := []struct {
		name    string
		list    []string
		want    map[string]float64
		wantErr bool
	}{
		{name: "hourly prices", list: []string{doc("m5.large", "Hrs", "0.0960000000"), doc("t3.micro", "Hrs", "0.0104")},
			want: map[string]float64{"m5.large": 0.096, "t3.micro": 0.0104}},
		{name: "zero placeholders and other units are skipped", list: []string{doc("m5.large", "Hrs", "0.0000000000"), doc("c5.large", "Quantity", "12")},
			want: map[string]float64{}},
		{name: "the lowest of several lines counts", list: []string{doc("m5.large", "Hrs", "0.2"), doc("m5.large", "Hrs", "0.096")},
			want: map[string]float64{"m5.large": 0.096}},
		{name: "not JSON", list: []string{"{"}, wantErr: true},
		{name: "not a number", list: []string{doc("m5.large", "Hrs", "cheap")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseOnDemandPrices(tt.list)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); !tt.wantErr && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLatestSpotPrices(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	point := func(name, zone, price string, ago time.Duration) ec2types.SpotPrice {
		return ec2types.SpotPrice{InstanceType: ec2types.InstanceType(name), AvailabilityZone: aws.String(zone),
			SpotPrice: aws.String(price), Timestamp: aws.Time(at.Add(-ago))}
	}
	got, err := LatestSpotPrices([]ec2types.SpotPrice{
		point("m5.large", "us-east-1a", "0.040", time.Hour),
		point("m5.large", "us-east-1a", "0.035", time.Minute),
		point("m5.large", "us-east-1a", "0.050", 2*time.Hour),
		point("m5.large", "us-east-1b", "0.037", time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]float64{"m5.large": {"us-east-1a": 0.035, "us-east-1b": 0.037}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPricesOver(t *testing.T) {
	live := Prices{OnDemand: map[string]float64{"m5.large": 0.1}, Spot: map[string]map[string]float64{"m5.large": {"us-east-1a": 0.03}}}
	fallback := Prices{OnDemand: map[string]float64{"m5.large": 0.096, "c5.large": 0.085},
		Spot: map[string]map[string]float64{"m5.large": {"us-east-1a": 0.04, "us-east-1b": 0.041}}}
	want := Prices{OnDemand: map[string]float64{"m5.large": 0.1, "c5.large": 0.085},
		Spot: map[string]map[string]float64{"m5.large": {"us-east-1a": 0.03, "us-east-1b": 0.041}}}
	if diff := cmp.Diff(want, live.Over(fallback)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFallbackPrices(t *testing.T) {
	p, err := FallbackPrices("eu-west-1")
	if err != nil {
		t.Fatal(err)
	}
	if p.OnDemand["m5.large"] <= 0 {
		t.Errorf("no on-demand price for m5.large: %v", p.OnDemand["m5.large"])
	}
	if p.Spot["m5.large"]["eu-west-1a"] <= 0 {
		t.Errorf("spot prices are not renamed into the region: %v", p.Spot["m5.large"])
	}
}

// Every listed region's fallback prices are us-east-1's times the region's m5.large
// ratio, in the region's zones; us-east-1's are the embedded list's own.
func TestFallbackPricesByRegion(t *testing.T) {
	base, err := FallbackPrices("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if base.OnDemand["m5.large"] != 0.096 {
		t.Fatalf("us-east-1 m5.large %v, want the list price 0.096", base.OnDemand["m5.large"])
	}
	for _, want := range []string{"us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1", "ap-northeast-1", "ap-south-1"} {
		if !slices.Contains(EmbeddedPriceRegions(), want) {
			t.Errorf("no embedded prices for %s", want)
		}
	}
	for _, region := range EmbeddedPriceRegions() {
		p, err := FallbackPrices(region)
		if err != nil {
			t.Fatalf("%s: %v", region, err)
		}
		if got := p.OnDemand["m5.large"]; math.Abs(got-m5LargeOnDemand[region]) > 1e-9 {
			t.Errorf("%s: m5.large %v, want its list price %v", region, got, m5LargeOnDemand[region])
		}
		ratio := m5LargeOnDemand[region] / 0.096
		if got, want := p.OnDemand["c5.large"], base.OnDemand["c5.large"]*ratio; math.Abs(got-want) > 1e-6 {
			t.Errorf("%s: c5.large %v, want %v", region, got, want)
		}
		if got, want := p.Spot["m5.large"][region+"a"], base.Spot["m5.large"]["us-east-1a"]*ratio; got <= 0 || math.Abs(got-want) > 1e-6 {
			t.Errorf("%s: m5.large spot in %sa %v, want %v", region, region, got, want)
		}
	}
}

// A region without embedded prices is an error for FallbackPrices, and a price book
// there starts from us-east-1's prices with a warning.
func TestUnknownRegionFallsBackToUSEast1(t *testing.T) {
	_, err := FallbackPrices("xx-nowhere-1")
	var unknown *NoEmbeddedPricesError
	if !errors.As(err, &unknown) || unknown.Region != "xx-nowhere-1" {
		t.Fatalf("FallbackPrices of an unknown region: %v", err)
	}
	b, err := NewPriceBook("xx-nowhere-1", nil, nil, clocktesting.NewFakeClock(time.Now()), time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.FallbackWarning(), "xx-nowhere-1") {
		t.Errorf("warning %q does not name the region", b.FallbackWarning())
	}
	p := b.Prices()
	if p.OnDemand["m5.large"] != 0.096 || p.Spot["m5.large"]["xx-nowhere-1a"] <= 0 {
		t.Errorf("prices %v / %v, want us-east-1's in the region's zones", p.OnDemand["m5.large"], p.Spot["m5.large"])
	}
	if known, _ := NewPriceBook("eu-west-1", nil, nil, clocktesting.NewFakeClock(time.Now()), time.Hour, time.Hour); known.FallbackWarning() != "" {
		t.Errorf("eu-west-1 warns: %s", known.FallbackWarning())
	}
}
