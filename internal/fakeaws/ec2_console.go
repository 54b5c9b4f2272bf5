package fakeaws

import (
	"encoding/base64"
	"strings"
)

// SetConsoleOutput replaces what the instance printed to its serial console (the
// fake's kubelet writes how its boot went). Unknown instances are ignored.
func (s *Server) SetConsoleOutput(id, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.ec2.instances[id]; i != nil {
		i.Console = text
	}
}

// getConsoleOutput is EC2's GetConsoleOutput: the console's last 64 KB, base64,
// with the time it was read.
func (s *Server) getConsoleOutput(q *queryParams) (ec2Response, error) {
	id := q.str("InstanceId")
	if _, _, err := q.optBool("Latest"); err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, badRequest("MissingParameter", "The request must contain the parameter InstanceId")
	}
	s.settleLocked()
	if err := s.checkInstanceIDs([]string{id}); err != nil {
		return nil, err
	}
	out := s.ec2.instances[id].Console
	if len(out) > 64<<10 {
		out = out[len(out)-64<<10:]
	}
	resp := &struct {
		ec2Meta
		InstanceID string  `xml:"instanceId"`
		Timestamp  xmlTime `xml:"timestamp"`
		Output     string  `xml:"output,omitempty"`
	}{InstanceID: id, Timestamp: xmlTime(s.now())}
	if strings.TrimSpace(out) != "" {
		resp.Output = base64.StdEncoding.EncodeToString([]byte(out))
	}
	return resp, nil
}
