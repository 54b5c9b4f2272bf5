package operator

import "testing"

func TestParseFeatureGates(t *testing.T) {
	tests := []struct {
		in      string
		want    FeatureGates
		wantErr bool
	}{
		{"", FeatureGates{}, false},
		{"NodeRepair=true", FeatureGates{NodeRepair: true}, false},
		{" NodeRepair = false ,", FeatureGates{}, false},
		{"NodeRepair", FeatureGates{}, true},
		{"NodeRepair=yes", FeatureGates{}, true},
		{"SpotToSpotConsolidation=true", FeatureGates{}, true},
	}
	for _, tt := range tests {
		got, err := ParseFeatureGates(tt.in)
		if (err != nil) != tt.wantErr || err == nil && got != tt.want {
			t.Errorf("%q: got %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
