package operator

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// Each level keeps what it should: debug the V(1) details, error only errors.
func TestNewLogger(t *testing.T) {
	tests := []struct {
		level                 string
		debug, info, errorLog bool
	}{
		{"debug", true, true, true},
		{"info", false, true, true},
		{"", false, true, true},
		{"error", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var out bytes.Buffer
			logger, err := NewLogger(&out, tt.level)
			if err != nil {
				t.Fatal(err)
			}
			logger.V(1).Info("a detail")
			logger.Info("a step")
			logger.Error(errors.New("boom"), "a failure")
			for _, c := range []struct {
				msg  string
				want bool
			}{{"a detail", tt.debug}, {"a step", tt.info}, {"a failure", tt.errorLog}} {
				if got := strings.Contains(out.String(), c.msg); got != c.want {
					t.Errorf("%q logged: %v, want %v; output:\n%s", c.msg, got, c.want, out.String())
				}
			}
		})
	}
	if _, err := NewLogger(&bytes.Buffer{}, "trace"); err == nil || !strings.Contains(err.Error(), `"trace"`) {
		t.Errorf("level trace: error %v", err)
	}
}

func TestLeaseNamespace(t *testing.T) {
	file := func(content string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if path != ServiceAccountNamespaceFile || content == "" {
				return nil, fs.ErrNotExist
			}
			return []byte(content), nil
		}
	}
	tests := []struct {
		name string
		env  map[string]string
		file string
		want string
	}{
		{"SYSTEM_NAMESPACE, as Karpenter's chart sets it", map[string]string{"SYSTEM_NAMESPACE": "karpenter", "POD_NAMESPACE": "other"}, "sa", "karpenter"},
		{"POD_NAMESPACE", map[string]string{"POD_NAMESPACE": "tailor"}, "sa", "tailor"},
		{"an empty variable is unset", map[string]string{"SYSTEM_NAMESPACE": " "}, "sa\n", "sa"},
		{"the service account's namespace", nil, "tailor-system\n", "tailor-system"},
		{"out of a cluster", nil, "", "kube-system"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			if got := LeaseNamespace(lookup, file(tt.file)); got != tt.want {
				t.Errorf("LeaseNamespace = %q, want %q", got, tt.want)
			}
		})
	}
}
