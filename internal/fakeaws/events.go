package fakeaws

import (
	"encoding/json"
	"fmt"
	"time"
)

// EventBridge delivers events to SQS as the event's JSON document, the message
// body. Field order and formats follow the events as EventBridge delivers them
// (see the EC2 and AWS Health user guides' examples).

type event struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     any      `json:"detail"`
}

// Detail types, as EventBridge rules match them.
const (
	DetailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailStateChange      = "EC2 Instance State-change Notification"
	DetailHealth           = "AWS Health Event"
	// DetailCapacityReservationInterruption warns of an instance of an
	// interruptible capacity reservation whose owner takes the capacity back.
	DetailCapacityReservationInterruption = "EC2 Capacity Reservation Instance Interruption Warning"
)

func (s *Server) newEventLocked(detailType, source string, at time.Time, resources []string, detail any) event {
	return event{
		Version: "0", ID: s.newUUIDLocked(), DetailType: detailType, Source: source, Account: s.opts.AccountID,
		Time: at.UTC().Format(time.RFC3339), Region: s.opts.Region, Resources: resources, Detail: detail,
	}
}

func (s *Server) instanceARN(i *instance) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.opts.Region, s.opts.AccountID, i.ID)
}

func stateChangeEvent(s *Server, i *instance, at time.Time) event {
	return s.newEventLocked(DetailStateChange, "aws.ec2", at, []string{s.instanceARN(i)}, struct {
		InstanceID string `json:"instance-id"`
		State      string `json:"state"`
	}{i.ID, i.State})
}

// postEventLocked delivers an event to the interruption queue. Like an
// EventBridge target whose queue is gone, it drops the event if there is none.
func (s *Server) postEventLocked(ev event) {
	q := s.sqs[s.opts.InterruptionQueue]
	if q == nil {
		return
	}
	body, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("fakeaws: encoding an event: %v", err)) // the event types always encode
	}
	s.enqueueLocked(q, string(body), 0)
}

// eventTarget finds an instance an event can be about: one that exists and is
// not yet shutting down.
func (s *Server) eventTarget(id string) (*instance, error) {
	s.settleLocked()
	i := s.ec2.instances[id]
	if i == nil {
		return nil, fmt.Errorf("no instance %s", id)
	}
	if i.State != statePending && i.State != stateRunning {
		return nil, fmt.Errorf("instance %s is %s", id, i.State)
	}
	return i, nil
}

// InterruptSpot does what EC2 does to reclaim a spot instance: the interruption
// warning goes to the interruption queue now, and the instance starts shutting
// down after Options.InterruptionDelay (two minutes unless set), unless it was
// terminated before then.
func (s *Server) InterruptSpot(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.eventTarget(instanceID)
	if err != nil {
		return err
	}
	if i.CapacityType != "spot" {
		return fmt.Errorf("instance %s is not a spot instance", instanceID)
	}
	now := s.now()
	// The warning's resource ARN names the zone and no account, as EC2 sends it.
	arn := fmt.Sprintf("arn:aws:ec2:%s:instance/%s", i.Zone, i.ID)
	s.postEventLocked(s.newEventLocked(DetailSpotInterruption, "aws.ec2", now, []string{arn}, struct {
		InstanceID     string `json:"instance-id"`
		InstanceAction string `json:"instance-action"`
	}{i.ID, "terminate"}))
	i.ReclaimAt = now.Add(s.opts.InterruptionDelay)
	return nil
}

// RecommendRebalance posts an EC2 Instance Rebalance Recommendation for a spot
// instance; nothing happens to the instance.
func (s *Server) RecommendRebalance(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.eventTarget(instanceID)
	if err != nil {
		return err
	}
	if i.CapacityType != "spot" {
		return fmt.Errorf("instance %s is not a spot instance", instanceID)
	}
	s.postEventLocked(s.newEventLocked(DetailRebalance, "aws.ec2", s.now(), []string{s.instanceARN(i)}, struct {
		InstanceID string `json:"instance-id"`
	}{i.ID}))
	return nil
}

// Health event type codes of scheduled EC2 maintenance.
const (
	HealthInstanceRetirement = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
	HealthInstanceStop       = "AWS_EC2_INSTANCE_STOP_SCHEDULED"
	HealthInstanceReboot     = "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED"
)

type healthDescription struct {
	Language          string `json:"language"`
	LatestDescription string `json:"latestDescription"`
}

type healthEntity struct {
	EntityValue string `json:"entityValue"`
}

type healthDetail struct {
	EventArn          string              `json:"eventArn"`
	Service           string              `json:"service"`
	EventScopeCode    string              `json:"eventScopeCode"`
	CommunicationID   string              `json:"communicationId"`
	LastUpdatedTime   string              `json:"lastUpdatedTime"`
	EventRegion       string              `json:"eventRegion"`
	EventTypeCode     string              `json:"eventTypeCode"`
	EventTypeCategory string              `json:"eventTypeCategory"`
	StartTime         string              `json:"startTime"`
	EndTime           string              `json:"endTime"`
	EventDescription  []healthDescription `json:"eventDescription"`
	AffectedEntities  []healthEntity      `json:"affectedEntities"`
}

// ScheduleChange posts an AWS Health scheduled-change event for an instance
// (typeCode such as HealthInstanceRetirement; empty means that one), with the
// maintenance window starting after delay. The instance itself is left alone.
func (s *Server) ScheduleChange(instanceID, typeCode string, delay time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.eventTarget(instanceID)
	if err != nil {
		return err
	}
	if typeCode == "" {
		typeCode = HealthInstanceRetirement
	}
	now := s.now()
	const httpDate = "Mon, 02 Jan 2006 15:04:05 GMT"
	suffix := fmt.Sprintf("%s_%08X", typeCode, s.rng.Uint32())
	detail := healthDetail{
		EventArn:          fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s", s.opts.Region, typeCode, suffix),
		Service:           "EC2",
		EventScopeCode:    "ACCOUNT_SPECIFIC",
		CommunicationID:   fmt.Sprintf("%x-1", s.rng.Uint64()),
		LastUpdatedTime:   now.UTC().Format(httpDate),
		EventRegion:       s.opts.Region,
		EventTypeCode:     typeCode,
		EventTypeCategory: "scheduledChange",
		StartTime:         now.Add(delay).UTC().Format(httpDate),
		EndTime:           now.Add(delay + 2*time.Hour).UTC().Format(httpDate),
		EventDescription: []healthDescription{{Language: "en_US", LatestDescription: fmt.Sprintf(
			"EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance %s in the %s region. Due to this degradation your instance could already be unreachable. We will stop your instance after %s.",
			i.ID, s.opts.Region, now.Add(delay).UTC().Format(httpDate))}},
		AffectedEntities: []healthEntity{{EntityValue: i.ID}},
	}
	s.postEventLocked(s.newEventLocked(DetailHealth, "aws.health", now, []string{i.ID}, detail))
	return nil
}

// StopInstance stops an instance as its owner or EC2 might: it goes stopping,
// then stopped after TerminationDelay, with state-change events if enabled.
func (s *Server) StopInstance(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.eventTarget(instanceID)
	if err != nil {
		return err
	}
	s.setStateLocked(i, stateStopping, s.now(), &xmlStateReason{Code: "Client.UserInitiatedShutdown", Message: "Client.UserInitiatedShutdown: User initiated shutdown"})
	return nil
}

// SetStateChangeEvents turns the instance state-change notifications on or off.
func (s *Server) SetStateChangeEvents(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.StateChangeEvents = on
}

// ReclaimCapacityReservation does what EC2 does when the owner of the source of
// an interruptible capacity reservation takes n instances of capacity back: the
// reservation shrinks by n, its free slots going first; for each running
// instance beyond what is left, an EC2 Capacity Reservation Instance
// Interruption Warning goes to the interruption queue, and the instance starts
// shutting down after Options.InterruptionDelay (two minutes unless set).
func (s *Server) ReclaimCapacityReservation(id string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	r := s.reservationByID(id)
	if r == nil {
		return fmt.Errorf("no capacity reservation %s", id)
	}
	if !r.Interruptible {
		return fmt.Errorf("capacity reservation %s is not interruptible", id)
	}
	n = min(n, r.Total)
	r.Total -= n
	free := min(n, r.Available)
	r.Available -= free
	evict := n - free
	now := s.now()
	at := now.Add(s.opts.InterruptionDelay)
	for _, iid := range s.ec2.order {
		i := s.ec2.instances[iid]
		if evict == 0 {
			break
		}
		if i.Reservation != id || (i.State != statePending && i.State != stateRunning) || !i.ReclaimAt.IsZero() {
			continue
		}
		s.postEventLocked(s.newEventLocked(DetailCapacityReservationInterruption, "aws.ec2", now, []string{s.instanceARN(i)}, struct {
			InstanceID      string `json:"instance-id"`
			InstanceAction  string `json:"instance-action"`
			TerminationTime string `json:"instance-termination-time"`
			ZoneID          string `json:"azId"`
		}{i.ID, "terminate", at.UTC().Format(time.RFC3339), s.inv.zoneID(i.Zone)}))
		i.ReclaimAt = at
		evict--
	}
	return nil
}
