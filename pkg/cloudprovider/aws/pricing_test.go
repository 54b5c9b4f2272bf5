package aws

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
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
