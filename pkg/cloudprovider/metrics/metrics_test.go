package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

func TestDecoratorRecordsCallsAndErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	inner := fake.New(schedtest.SyntheticTypes(2))
	cp := Decorate(inner, m)
	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	nc, err := cp.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	terminating := WithController(t.Context(), "termination")
	if err := cp.Delete(terminating, nc); err != nil {
		t.Fatal(err)
	}
	_ = cp.Delete(terminating, nc) // gone: NodeClaimNotFound
	if got := testutil.ToFloat64(m.Errors.WithLabelValues("termination", "Delete", "fake", "NodeClaimNotFoundError")); got != 1 {
		t.Errorf("Delete errors counted %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.Duration); n != 2 {
		t.Errorf("%d duration series, want Create (no controller) and Delete (termination)", n)
	}
	if cp.Name() != "fake" || len(inner.Calls) != 3 {
		t.Errorf("decorator changed the provider: name %q, calls %v", cp.Name(), inner.Calls)
	}
}
