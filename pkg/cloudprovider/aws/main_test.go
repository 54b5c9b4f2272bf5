package aws

import (
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/internal/testenv"
)

// kube is a client of the API server the integration tests share.
var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }
