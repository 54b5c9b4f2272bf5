package fakeaws

import (
	"fmt"
	"slices"
	"time"
)

// EC2's status checks (DescribeInstanceStatus). A running instance passes both
// checks unless a test impairs one (ImpairInstance): the system check (the host:
// power, network, hardware) or the instance check (the instance's own
// reachability through its primary network interface).

// Status checks an instance can fail.
const (
	CheckSystem   = "system"
	CheckInstance = "instance"
)

// impairment is a failed status check: which, since when.
type impairment struct {
	Check string
	Since time.Time
}

// ImpairInstance makes a status check of a running instance fail from now on
// (its reachability detail failed, the check impaired), as EC2 reports a host
// fault (check CheckSystem) or an unreachable instance (CheckInstance).
func (s *Server) ImpairInstance(id, check string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if check != CheckSystem && check != CheckInstance {
		return fmt.Errorf("no status check %q: want %q or %q", check, CheckSystem, CheckInstance)
	}
	i, err := s.eventTarget(id)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(i.Impaired, func(m impairment) bool { return m.Check == check }) {
		i.Impaired = append(i.Impaired, impairment{Check: check, Since: s.now()})
	}
	return nil
}

type xmlStatusDetail struct {
	Name          string   `xml:"name"`
	Status        string   `xml:"status"`
	ImpairedSince *xmlTime `xml:"impairedSince,omitempty"`
}

type xmlStatusSummary struct {
	Status  string            `xml:"status"`
	Details []xmlStatusDetail `xml:"details>item"`
}

type xmlInstanceStatus struct {
	InstanceID         string           `xml:"instanceId"`
	AvailabilityZone   string           `xml:"availabilityZone"`
	AvailabilityZoneID string           `xml:"availabilityZoneId"`
	InstanceState      xmlInstanceState `xml:"instanceState"`
	SystemStatus       xmlStatusSummary `xml:"systemStatus"`
	InstanceStatus     xmlStatusSummary `xml:"instanceStatus"`
	AttachedEbsStatus  xmlStatusSummary `xml:"attachedEbsStatus"`
}

// statusOf is what a check of an instance reports: not-applicable unless it
// runs, else ok or, with its reachability failed, impaired.
func (i *instance) statusOf(check string) xmlStatusSummary {
	if i.State != stateRunning {
		return xmlStatusSummary{Status: "not-applicable"}
	}
	for _, m := range i.Impaired {
		if m.Check == check {
			since := xmlTime(m.Since)
			return xmlStatusSummary{Status: "impaired", Details: []xmlStatusDetail{{Name: "reachability", Status: "failed", ImpairedSince: &since}}}
		}
	}
	return xmlStatusSummary{Status: "ok", Details: []xmlStatusDetail{{Name: "reachability", Status: "passed"}}}
}

var instanceStatusFilters = map[string]func(*instance) []string{
	"instance-id":                  func(i *instance) []string { return []string{i.ID} },
	"instance-state-name":          func(i *instance) []string { return []string{i.State} },
	"availability-zone":            func(i *instance) []string { return []string{i.Zone} },
	"system-status.status":         func(i *instance) []string { return []string{i.statusOf(CheckSystem).Status} },
	"instance-status.status":       func(i *instance) []string { return []string{i.statusOf(CheckInstance).Status} },
	"system-status.reachability":   func(i *instance) []string { return detailStatuses(i.statusOf(CheckSystem)) },
	"instance-status.reachability": func(i *instance) []string { return detailStatuses(i.statusOf(CheckInstance)) },
	// The fake schedules no maintenance events.
	"event.code": func(*instance) []string { return nil },
}

func detailStatuses(s xmlStatusSummary) []string {
	var out []string
	for _, d := range s.Details {
		out = append(out, d.Status)
	}
	return out
}

// describeInstanceStatus answers as EC2 does: running instances only, unless
// IncludeAllInstances; MaxResults cannot be combined with instance IDs.
func (s *Server) describeInstanceStatus(q *queryParams) (ec2Response, error) {
	ids := q.list("InstanceId")
	all, _, err := q.optBool("IncludeAllInstances")
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 && q.has("MaxResults") {
		return nil, badRequest("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	page, err := readPage(q, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*instance]{fields: instanceStatusFilters}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	s.settleLocked()
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	now := s.now()
	var out []xmlInstanceStatus
	for _, id := range s.ec2.order {
		i := s.ec2.instances[id]
		if !i.visible(now) || (len(ids) > 0 && !slices.Contains(ids, id)) || (!all && i.State != stateRunning) || !match(i) {
			continue
		}
		out = append(out, xmlInstanceStatus{
			InstanceID: i.ID, AvailabilityZone: i.Zone, AvailabilityZoneID: s.inv.zoneID(i.Zone),
			InstanceState: xmlInstanceState{Code: stateCodes[i.State], Name: i.State},
			SystemStatus:  i.statusOf(CheckSystem), InstanceStatus: i.statusOf(CheckInstance),
			AttachedEbsStatus: func() xmlStatusSummary {
				if i.State != stateRunning {
					return xmlStatusSummary{Status: "not-applicable"}
				}
				return xmlStatusSummary{Status: "ok", Details: []xmlStatusDetail{{Name: "reachability", Status: "passed"}}}
			}(),
		})
	}
	items, next := pageOf(out, page)
	return &struct {
		ec2Meta
		Statuses  []xmlInstanceStatus `xml:"instanceStatusSet>item"`
		NextToken string              `xml:"nextToken,omitempty"`
	}{Statuses: items, NextToken: next}, nil
}
