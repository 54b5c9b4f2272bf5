package fakeaws

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// apiError is an error as AWS reports it: a code the SDK turns into an error type,
// a message, and the HTTP status (which drives the SDK's retry decision as much as
// the code does).
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(code, format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, code, format, args...)
}

func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return errorf(http.StatusInternalServerError, "InternalError", "%v", err)
}

// queryParams reads a Query-protocol form (EC2, IAM) and remembers which keys were
// read, so whatever a handler did not read can be reported as AWS does: an unknown
// parameter is an error, never silently dropped.
type queryParams struct {
	values map[string]string
	used   map[string]bool
	// dryRun is EC2's DryRun: check everything, then fail with DryRunOperation.
	dryRun bool
}

func parseQuery(body []byte) (*queryParams, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, badRequest("MalformedQueryString", "the request body is not a form: %v", err)
	}
	q := &queryParams{values: map[string]string{}, used: map[string]bool{}}
	for k, vs := range form {
		if len(vs) != 1 {
			return nil, badRequest("InvalidParameterValue", "parameter %s is given %d times", k, len(vs))
		}
		q.values[k] = vs[0]
	}
	return q, nil
}

func (q *queryParams) has(key string) bool {
	_, ok := q.values[key]
	return ok
}

func (q *queryParams) str(key string) string {
	q.used[key] = true
	return q.values[key]
}

func (q *queryParams) optInt(key string) (int, bool, error) {
	v, ok := q.values[key]
	q.used[key] = true
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false, badRequest("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expected an integer.", v, key)
	}
	return n, true, nil
}

func (q *queryParams) optFloat(key string) (float64, bool, error) {
	v, ok := q.values[key]
	q.used[key] = true
	if !ok {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false, badRequest("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expected a number.", v, key)
	}
	return f, true, nil
}

func (q *queryParams) optBool(key string) (bool, bool, error) {
	v, ok := q.values[key]
	q.used[key] = true
	if !ok {
		return false, false, nil
	}
	switch v {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, false, badRequest("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expected true or false.", v, key)
}

func (q *queryParams) optTime(key string) (time.Time, bool, error) {
	v, ok := q.values[key]
	q.used[key] = true
	if !ok {
		return time.Time{}, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false, badRequest("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expected an ISO 8601 timestamp.", v, key)
	}
	return t, true, nil
}

// indices returns the 1-based member prefixes of a list (prefix.1, prefix.2, …) in
// numeric order. Members are whatever follows the index: a scalar (prefix.1) or a
// structure (prefix.1.Name).
func (q *queryParams) indices(prefix string) []string {
	seen := map[int]bool{}
	for k := range q.values {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		head, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(head); err == nil && n > 0 {
			seen[n] = true
		}
	}
	ns := make([]int, 0, len(seen))
	for n := range seen {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = prefix + "." + strconv.Itoa(n)
	}
	return out
}

// list reads a list of scalars.
func (q *queryParams) list(prefix string) []string {
	var out []string
	for _, p := range q.indices(prefix) {
		if q.has(p) {
			out = append(out, q.str(p))
		}
	}
	return out
}

// accept marks keys under prefix as understood without modelling them: parameters
// that AWS accepts and that change nothing a test can observe.
func (q *queryParams) accept(prefixes ...string) {
	for k := range q.values {
		for _, p := range prefixes {
			if k == p || strings.HasPrefix(k, p+".") {
				q.used[k] = true
			}
		}
	}
}

// unknown fails on the first key no handler read.
func (q *queryParams) unknown() error {
	var left []string
	for k := range q.values {
		if !q.used[k] {
			left = append(left, k)
		}
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	// Either the SDK sends something new, or the caller uses a member the fake
	// does not model; both should fail loudly rather than be ignored.
	return badRequest("UnknownParameter", "The parameter %s is not recognized (fakeaws reads only the parameters it models)", left[0])
}

// done ends parsing: unknown parameters fail, and so does a dry run that got this
// far (EC2's way of saying the request would have succeeded). Handlers call it
// before they change anything.
func (q *queryParams) done() error {
	if err := q.unknown(); err != nil {
		return err
	}
	if q.dryRun {
		return errorf(http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return nil
}

// fingerprint is a canonical form of the request, for idempotency tokens.
func (q *queryParams) fingerprint(skip ...string) string {
	keys := make([]string, 0, len(q.values))
	for k := range q.values {
		if !slices.Contains(skip, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(q.values[k])
		b.WriteByte('&')
	}
	return b.String()
}

// tags reads a Tag.N.Key / Tag.N.Value list.
func (q *queryParams) tags(prefix string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range q.indices(prefix) {
		key := q.str(p + ".Key")
		if key == "" {
			return nil, badRequest("InvalidParameterValue", "Tag keys must not be empty (%s.Key)", p)
		}
		out[key] = q.str(p + ".Value")
	}
	return out, nil
}

// decodeJSON decodes a JSON-protocol body strictly: an unknown member fails, as
// an SDK that started sending a new member should fail a test.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("SerializationException", "cannot read the request: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("SerializationException", "cannot read the request: trailing data")
	}
	return nil
}

// xmlTime writes timestamps as EC2 and IAM do: ISO 8601, UTC, milliseconds.
type xmlTime time.Time

func (t xmlTime) MarshalText() ([]byte, error) {
	return []byte(time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z")), nil
}

// writeXML writes doc as the element start, after the XML declaration.
func writeXML(w http.ResponseWriter, status int, start xml.StartElement, doc any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	if err := enc.EncodeElement(doc, start); err != nil {
		http.Error(w, "fakeaws: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "fakeaws: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// epochSeconds is how the JSON protocols write timestamps by default.
func epochSeconds(t time.Time) float64 {
	return float64(t.UnixMilli()) / 1000
}
