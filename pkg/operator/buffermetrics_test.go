package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
)

// The collector reports the CapacityBuffers' status conditions only when told to
// (Run tells it when the CapacityBuffer gate is on and the API server serves
// them, as Karpenter makes their status controller only with its gate on); until
// then it does not even list them.
func TestScrapeReportsCapacityBuffersOnlyWhenTold(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	buffer := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: "web"},
		Status: cb.CapacityBufferStatus{Conditions: []metav1.Condition{{Type: cb.ConditionProvisioning, Status: metav1.ConditionTrue,
			Reason: "CapacityProvisioned", LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(buffer).Build()
	reader := &countingReader{Reader: kube, lists: map[string]int{}}
	collector, err := newClusterCollector(reader, &fakePodInformer{}, noTypes, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() map[string][]string {
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(collector); err != nil {
			t.Fatal(err)
		}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if strings.HasPrefix(f.GetName(), "operator_capacitybuffer_") || hasLabel(m, "kind", "CapacityBuffer") {
					out[f.GetName()] = append(out[f.GetName()], labelString(m))
				}
			}
		}
		return out
	}
	if got := scrape(); len(got) != 0 {
		t.Errorf("without ReportCapacityBuffers the scrape reported %v", got)
	}
	if n := reader.count("*v1beta1.CapacityBufferList"); n != 0 {
		t.Errorf("without ReportCapacityBuffers the scrape listed CapacityBuffers %d times", n)
	}
	collector.ReportCapacityBuffers()
	got := scrape()
	const labels = "name=room namespace=web reason=CapacityProvisioned status=True type=Provisioning "
	for family, want := range map[string]string{
		"operator_capacitybuffer_status_condition_count":                  labels,
		"operator_capacitybuffer_status_condition_current_status_seconds": labels,
		"operator_status_condition_count":                                 "group=autoscaling.x-k8s.io kind=CapacityBuffer " + labels,
		"operator_status_condition_current_status_seconds":                "group=autoscaling.x-k8s.io kind=CapacityBuffer " + labels,
	} {
		if len(got[family]) != 1 || got[family][0] != want {
			t.Errorf("%s: %q, want one series {%s}", family, got[family], want)
		}
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
