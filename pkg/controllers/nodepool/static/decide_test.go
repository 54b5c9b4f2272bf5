package static

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// up is an initialized claim with pods on its node, created minutes after t0.
func up(name string, pods, minutes int) Claim {
	return Claim{Name: name, Launched: true, Registered: true, Initialized: true, Pods: pods, Created: t0.Add(time.Duration(minutes) * time.Minute)}
}

func with(c Claim, edit func(*Claim)) Claim { edit(&c); return c }

func limit(n int64) *int64 { return &n }

func TestDecide(t *testing.T) {
	notLaunched := Claim{Name: "pending", Created: t0.Add(time.Hour)}
	launched := Claim{Name: "launched", Launched: true, Created: t0}
	registered := Claim{Name: "registered", Launched: true, Registered: true, Created: t0}
	deleting := with(up("deleting", 0, 0), func(c *Claim) { c.Deleting = true })
	disrupting := with(up("disrupting", 3, 0), func(c *Claim) { c.Disrupting = true })
	for _, tc := range []struct {
		name      string
		replicas  int64
		nodeLimit *int64
		claims    []Claim
		want      Decision
	}{
		{name: "none yet", replicas: 3, want: Decision{Create: 3}},
		{name: "zero replicas, none", replicas: 0, want: Decision{}},
		{name: "at replicas", replicas: 2, claims: []Claim{up("a", 1, 0), up("b", 0, 0)}, want: Decision{}},
		{name: "one short", replicas: 3, claims: []Claim{up("a", 1, 0), up("b", 0, 0)}, want: Decision{Create: 1}},
		{name: "a deleting claim is replaced", replicas: 2, claims: []Claim{up("a", 1, 0), deleting}, want: Decision{Create: 1}},
		{name: "a disrupted claim is replaced while it drains", replicas: 2, claims: []Claim{up("a", 1, 0), disrupting}, want: Decision{Create: 1}},
		{name: "limits.nodes counts leaving claims", replicas: 2, nodeLimit: limit(2), claims: []Claim{up("a", 1, 0), disrupting},
			want: Decision{Held: 1}},
		{name: "limits.nodes above replicas leaves room for a replacement", replicas: 2, nodeLimit: limit(3), claims: []Claim{up("a", 1, 0), disrupting},
			want: Decision{Create: 1}},
		{name: "limits.nodes below replicas", replicas: 5, nodeLimit: limit(3), claims: []Claim{up("a", 0, 0)},
			want: Decision{Create: 2, Held: 2}},
		{name: "limits.nodes already passed", replicas: 5, nodeLimit: limit(1), claims: []Claim{up("a", 0, 0), up("b", 0, 0)},
			want: Decision{Held: 3}},
		{name: "scale down: not launched first, then not registered, then not initialized",
			replicas: 1, claims: []Claim{up("a", 0, 0), registered, launched, notLaunched},
			want: Decision{Delete: []string{"pending", "launched", "registered"}}},
		{name: "scale down: fewest pods first", replicas: 2, claims: []Claim{up("busy", 5, 0), up("idle", 0, 0), up("light", 1, 0), up("mid", 2, 0)},
			want: Decision{Delete: []string{"idle", "light"}}},
		{name: "scale down: equal pods, newest first", replicas: 1, claims: []Claim{up("old", 1, 0), up("new", 1, 30), up("newer", 1, 60)},
			want: Decision{Delete: []string{"newer", "new"}}},
		{name: "scale down ignores claims already leaving", replicas: 1, claims: []Claim{deleting, disrupting, up("a", 2, 0), up("b", 4, 0)},
			want: Decision{Delete: []string{"a"}}},
		{name: "scale to zero", replicas: 0, claims: []Claim{up("a", 2, 0), deleting},
			want: Decision{Delete: []string{"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.replicas, tc.nodeLimit, tc.claims)); diff != "" {
				t.Errorf("Decide(replicas %d) (-want +got):\n%s", tc.replicas, diff)
			}
		})
	}
}
