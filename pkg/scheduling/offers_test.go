package scheduling

import (
	"math/rand/v2"
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// The slot masks choose the same offering as CheapestOffering, for any zone and
// capacity-type requirements, ties and unavailable offerings included.
func TestCheapestBySlotsMatchesCheapestOffering(t *testing.T) {
	zones := []string{"a", "b", "c", "d"}
	captypes := []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand, "reserved"}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		ps := &poolState{}
		for i := range 5 {
			it := &InstanceType{Name: string(rune('p' + i))}
			for _, z := range zones {
				for _, ct := range captypes {
					if rng.IntN(3) == 0 {
						continue
					}
					// Few distinct prices, so ties happen.
					it.Offerings = append(it.Offerings, Offering{Zone: z, CapacityType: ct, Price: float64(rng.IntN(4)), Available: rng.IntN(5) > 0})
				}
			}
			ps.types = append(ps.types, &typeInfo{it: it})
		}
		ps.addOfferSlots()
		for range 20 {
			var reqs Requirements
			if rng.IntN(2) == 0 {
				reqs = reqs.With(MustRequirement(v1.LabelZone, v1.NodeSelectorOpIn, zones[rng.IntN(4)], zones[rng.IntN(4)]))
			}
			if rng.IntN(2) == 0 {
				reqs = reqs.With(MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpNotIn, captypes[rng.IntN(3)]))
			}
			f := ps.offerFilter(reqs)
			for _, ti := range ps.types {
				want, wantOK := ti.it.CheapestOffering(reqs)
				got, gotOK := ti.cheapest(f)
				if got != want || gotOK != wantOK {
					t.Fatalf("round %d, %s under %s: slots chose %+v (%v), CheapestOffering %+v (%v)", round, ti.it.Name, reqs, got, gotOK, want, wantOK)
				}
			}
		}
	}
}
