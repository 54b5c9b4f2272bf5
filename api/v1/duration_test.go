package v1

import (
	"encoding/json"
	"testing"
	"time"
)

func TestNillableDurationJSON(t *testing.T) {
	hour := time.Hour
	for _, tc := range []struct {
		json string
		want NillableDuration
	}{
		{json: `"Never"`, want: NillableDuration{Never: true}},
		{json: `"1h0m0s"`, want: NillableDuration{Duration: &hour}},
		{json: `null`, want: NillableDuration{}},
	} {
		var got NillableDuration
		if err := json.Unmarshal([]byte(tc.json), &got); err != nil {
			t.Fatalf("unmarshal %s: %v", tc.json, err)
		}
		if got.String() != tc.want.String() || got.Never != tc.want.Never {
			t.Errorf("unmarshal %s = %q, want %q", tc.json, got, tc.want)
		}
		back, err := json.Marshal(got)
		if err != nil || string(back) != tc.json {
			t.Errorf("marshal %q = %s (%v), want %s", got, back, err, tc.json)
		}
	}
	for _, bad := range []string{`"30d"`, `"soon"`, `42`} {
		var d NillableDuration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("unmarshal %s succeeded, want an error", bad)
		}
	}
	// An unset duration is left out, so the API server applies the default.
	out, _ := json.Marshal(struct {
		D NillableDuration `json:"d,omitzero"`
	}{})
	if string(out) != `{}` {
		t.Errorf("unset duration marshals to %s, want it omitted", out)
	}
	if d, ok := MustParseNillableDuration("90s").Get(); !ok || d != 90*time.Second {
		t.Errorf("Get of 90s = %v, %v", d, ok)
	}
	if _, ok := MustParseNillableDuration(Never).Get(); ok {
		t.Error("Get of Never reported a duration")
	}
}
