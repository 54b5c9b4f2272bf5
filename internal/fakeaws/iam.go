package fakeaws

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// IAM, Query protocol: answers are <XResponse><XResult>…</XResult>
// <ResponseMetadata><RequestId>, lists are <member> elements.

type iamHandler func(*Server, *queryParams) (any, error)

var iamHandlers = map[string]iamHandler{
	"GetInstanceProfile":            (*Server).getInstanceProfile,
	"CreateInstanceProfile":         (*Server).createInstanceProfile,
	"DeleteInstanceProfile":         (*Server).deleteInstanceProfile,
	"AddRoleToInstanceProfile":      (*Server).addRoleToInstanceProfile,
	"RemoveRoleFromInstanceProfile": (*Server).removeRoleFromInstanceProfile,
	"ListInstanceProfiles":          (*Server).listInstanceProfiles,
	"TagInstanceProfile":            (*Server).tagInstanceProfile,
	"GetRole":                       (*Server).getRole,
}

func (s *Server) serveIAM(w http.ResponseWriter, c *call) error {
	h, ok := iamHandlers[c.action]
	if !ok {
		return badRequest("InvalidAction", "Could not find operation %s for version %s", c.action, iamVersion)
	}
	c.query.str("Action")
	c.query.str("Version")
	s.mu.Lock()
	result, err := h(s, c.query)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	doc := struct {
		Result    any    `xml:",omitempty"`
		RequestID string `xml:"ResponseMetadata>RequestId"`
	}{RequestID: c.reqID}
	if result != nil {
		doc.Result = iamResult{name: c.action + "Result", v: result}
	}
	writeXML(w, http.StatusOK, xml.StartElement{
		Name: xml.Name{Local: c.action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: iamNamespace}},
	}, doc)
	return nil
}

// iamResult encodes v as the <ActionResult> element.
type iamResult struct {
	name string
	v    any
}

func (r iamResult) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	return e.EncodeElement(r.v, xml.StartElement{Name: xml.Name{Local: r.name}})
}

type iamXMLTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type iamXMLRole struct {
	Path                     string  `xml:"Path"`
	RoleName                 string  `xml:"RoleName"`
	RoleID                   string  `xml:"RoleId"`
	Arn                      string  `xml:"Arn"`
	CreateDate               xmlTime `xml:"CreateDate"`
	AssumeRolePolicyDocument string  `xml:"AssumeRolePolicyDocument"`
}

type iamXMLProfile struct {
	Path                string       `xml:"Path"`
	InstanceProfileName string       `xml:"InstanceProfileName"`
	InstanceProfileID   string       `xml:"InstanceProfileId"`
	Arn                 string       `xml:"Arn"`
	CreateDate          xmlTime      `xml:"CreateDate"`
	Roles               []iamXMLRole `xml:"Roles>member"`
	Tags                []iamXMLTag  `xml:"Tags>member,omitempty"`
}

// The trust policy EC2 nodes' roles carry, URL-encoded as IAM returns it.
const ec2TrustPolicy = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Principal%22%3A%7B%22Service%22%3A%22ec2.amazonaws.com%22%7D%2C%22Action%22%3A%22sts%3AAssumeRole%22%7D%5D%7D"

func (s *Server) roleView(r *iamRole) iamXMLRole {
	return iamXMLRole{
		Path: r.Path, RoleName: r.Name, RoleID: r.id, CreateDate: xmlTime(r.createdAt),
		Arn:                      fmt.Sprintf("arn:aws:iam::%s:role%s%s", s.opts.AccountID, r.Path, r.Name),
		AssumeRolePolicyDocument: ec2TrustPolicy,
	}
}

func (s *Server) profileARN(p *iamProfile) string {
	return fmt.Sprintf("arn:aws:iam::%s:instance-profile%s%s", s.opts.AccountID, p.Path, p.Name)
}

func (s *Server) profileView(p *iamProfile) iamXMLProfile {
	x := iamXMLProfile{
		Path: p.Path, InstanceProfileName: p.Name, InstanceProfileID: p.id, Arn: s.profileARN(p), CreateDate: xmlTime(p.createdAt),
		Roles: []iamXMLRole{},
	}
	for _, r := range p.Roles {
		if role := s.inv.roles[r]; role != nil {
			x.Roles = append(x.Roles, s.roleView(role))
		}
	}
	for _, k := range sortedKeys(p.Tags) {
		x.Tags = append(x.Tags, iamXMLTag{k, p.Tags[k]})
	}
	return x
}

// profileByRef finds an instance profile by name or ARN, as a launch template
// names it.
func (s *Server) profileByRef(name, arn string) *iamProfile {
	if name != "" {
		return s.inv.profiles[name]
	}
	for _, p := range s.inv.profiles {
		if s.profileARN(p) == arn {
			return p
		}
	}
	return nil
}

func noSuchEntity(kind, name string) *apiError {
	return errorf(http.StatusNotFound, "NoSuchEntity", "The %s with name %s cannot be found.", kind, name)
}

func (s *Server) profileNamed(name string) (*iamProfile, error) {
	if name == "" {
		return nil, badRequest("ValidationError", "1 validation error detected: Value null at 'instanceProfileName' failed to satisfy constraint: Member must not be null")
	}
	p := s.inv.profiles[name]
	if p == nil {
		return nil, noSuchEntity("Instance Profile", name)
	}
	return p, nil
}

var iamName = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)

func (s *Server) getInstanceProfile(q *queryParams) (any, error) {
	name := q.str("InstanceProfileName")
	if err := q.done(); err != nil {
		return nil, err
	}
	p, err := s.profileNamed(name)
	if err != nil {
		return nil, err
	}
	return struct {
		P iamXMLProfile `xml:"InstanceProfile"`
	}{s.profileView(p)}, nil
}

func (s *Server) createInstanceProfile(q *queryParams) (any, error) {
	name, path := q.str("InstanceProfileName"), q.str("Path")
	tags := map[string]string{}
	for _, p := range q.indices("Tags.member") {
		tags[q.str(p+".Key")] = q.str(p + ".Value")
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	if !iamName.MatchString(name) {
		return nil, badRequest("ValidationError", "The specified value for instanceProfileName is invalid. It must contain only alphanumeric characters and/or the following: +=,.@_-")
	}
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") || !strings.HasSuffix(path, "/") {
		return nil, badRequest("ValidationError", "The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.")
	}
	if s.inv.profiles[name] != nil {
		return nil, errorf(http.StatusConflict, "EntityAlreadyExists", "Instance Profile %s already exists.", name)
	}
	p := &iamProfile{InstanceProfile: InstanceProfile{Name: name, Path: path, Tags: tags}, id: s.newIAMIDLocked("AIPA"), createdAt: s.now()}
	s.inv.profiles[name] = p
	return struct {
		P iamXMLProfile `xml:"InstanceProfile"`
	}{s.profileView(p)}, nil
}

func (s *Server) newIAMIDLocked(prefix string) string {
	return fmt.Sprintf("%s%017X", prefix, s.rng.Uint64()&0xfffffffffffffff)
}

func (s *Server) deleteInstanceProfile(q *queryParams) (any, error) {
	name := q.str("InstanceProfileName")
	if err := q.done(); err != nil {
		return nil, err
	}
	p, err := s.profileNamed(name)
	if err != nil {
		return nil, err
	}
	if len(p.Roles) > 0 {
		return nil, errorf(http.StatusConflict, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
	}
	delete(s.inv.profiles, name)
	return nil, nil
}

func (s *Server) addRoleToInstanceProfile(q *queryParams) (any, error) {
	name, role := q.str("InstanceProfileName"), q.str("RoleName")
	if err := q.done(); err != nil {
		return nil, err
	}
	p, err := s.profileNamed(name)
	if err != nil {
		return nil, err
	}
	if s.inv.roles[role] == nil {
		return nil, noSuchEntity("role", role)
	}
	if len(p.Roles) > 0 {
		return nil, errorf(http.StatusConflict, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	p.Roles = []string{role}
	return nil, nil
}

func (s *Server) removeRoleFromInstanceProfile(q *queryParams) (any, error) {
	name, role := q.str("InstanceProfileName"), q.str("RoleName")
	if err := q.done(); err != nil {
		return nil, err
	}
	p, err := s.profileNamed(name)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(p.Roles, role) {
		return nil, noSuchEntity("role", role)
	}
	p.Roles = slices.DeleteFunc(p.Roles, func(r string) bool { return r == role })
	return nil, nil
}

func (s *Server) tagInstanceProfile(q *queryParams) (any, error) {
	name := q.str("InstanceProfileName")
	tags := map[string]string{}
	for _, p := range q.indices("Tags.member") {
		tags[q.str(p+".Key")] = q.str(p + ".Value")
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	p, err := s.profileNamed(name)
	if err != nil {
		return nil, err
	}
	maps.Copy(p.Tags, tags)
	return nil, nil
}

func (s *Server) listInstanceProfiles(q *queryParams) (any, error) {
	prefix := q.str("PathPrefix")
	maxItems, set, err := q.optInt("MaxItems")
	if err != nil {
		return nil, err
	}
	if !set {
		maxItems = 100
	}
	offset, err := decodeToken(q.str("Marker"))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = "/"
	}
	var all []iamXMLProfile
	for _, name := range slices.Sorted(maps.Keys(s.inv.profiles)) {
		if p := s.inv.profiles[name]; strings.HasPrefix(p.Path, prefix) {
			all = append(all, s.profileView(p))
		}
	}
	items, next := cut(all, offset, maxItems)
	return struct {
		Profiles    []iamXMLProfile `xml:"InstanceProfiles>member"`
		IsTruncated bool            `xml:"IsTruncated"`
		Marker      string          `xml:"Marker,omitempty"`
	}{Profiles: items, IsTruncated: next != "", Marker: next}, nil
}

func (s *Server) getRole(q *queryParams) (any, error) {
	name := q.str("RoleName")
	if err := q.done(); err != nil {
		return nil, err
	}
	r := s.inv.roles[name]
	if r == nil {
		return nil, noSuchEntity("role", name)
	}
	return struct {
		R iamXMLRole `xml:"Role"`
	}{s.roleView(r)}, nil
}
