package convert

import (
	"bytes"
	"encoding/json"
	"regexp"

	"sigs.k8s.io/yaml"
)

// render writes a converted object as YAML, without the empty status and
// creationTimestamp the Go types carry, and with durations as people write them
// ("5m", not "5m0s").
func render(obj any) ([]byte, error) {
	js, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if spec, ok := m["spec"].(map[string]any); ok {
		compactDuration(spec, "expireAfter")
		if d, ok := spec["disruption"].(map[string]any); ok {
			compactDuration(d, "consolidateAfter")
			if budgets, ok := d["budgets"].([]any); ok {
				for _, b := range budgets {
					if b, ok := b.(map[string]any); ok {
						compactDuration(b, "duration")
					}
				}
			}
			if len(d) == 0 {
				delete(spec, "disruption")
			}
		}
		if t, ok := spec["template"].(map[string]any); ok {
			if md, ok := t["metadata"].(map[string]any); ok && len(md) == 0 {
				delete(t, "metadata")
			}
			if ts, ok := t["spec"].(map[string]any); ok {
				compactDuration(ts, "expireAfter")
			}
		}
		if k, ok := spec["kubelet"].(map[string]any); ok {
			if grace, ok := k["evictionSoftGracePeriod"].(map[string]any); ok {
				for signal := range grace {
					compactDuration(grace, signal)
				}
			}
		}
		if r, ok := spec["resources"].(map[string]any); ok && len(r) == 0 {
			delete(spec, "resources")
		}
	}
	return yaml.Marshal(m)
}

var zeroUnits = regexp.MustCompile(`([hm])0m0s$|([hm])0s$`)

// compactDuration drops trailing zero units from a Go duration string: 720h0m0s
// becomes 720h, 1m30s stays.
func compactDuration(m map[string]any, key string) {
	s, ok := m[key].(string)
	if !ok {
		return
	}
	m[key] = zeroUnits.ReplaceAllString(s, "$1$2")
}
