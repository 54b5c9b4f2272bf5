package fakeaws

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
)

// filter is an EC2 Filter.N: a name and values, any of which may match.
type filter struct {
	name   string
	values []string
}

func readFilters(q *queryParams) []filter {
	var out []filter
	for _, p := range q.indices("Filter") {
		out = append(out, filter{name: q.str(p + ".Name"), values: q.list(p + ".Value")})
	}
	return out
}

// filterSet is the filters one kind of resource accepts, each giving the values
// of a resource it compares against. EC2 rejects a filter it does not know, and so
// does the fake.
type filterSet[T any] struct {
	fields map[string]func(T) []string
	// tags enables tag:KEY, tag-key and tag-value.
	tags func(T) map[string]string
}

func (fs filterSet[T]) compile(filters []filter) (func(T) bool, error) {
	type compiled struct {
		get    func(T) []string
		values []string
	}
	var cs []compiled
	for _, f := range filters {
		if len(f.values) == 0 {
			return nil, badRequest("InvalidParameterValue", "The filter '%s' has no values", f.name)
		}
		get, ok := fs.fields[f.name]
		switch {
		case ok:
		case fs.tags != nil && strings.HasPrefix(f.name, "tag:"):
			key := strings.TrimPrefix(f.name, "tag:")
			get = func(r T) []string {
				if v, ok := fs.tags(r)[key]; ok {
					return []string{v}
				}
				return nil
			}
		case fs.tags != nil && f.name == "tag-key":
			get = func(r T) []string { return sortedKeys(fs.tags(r)) }
		case fs.tags != nil && f.name == "tag-value":
			get = func(r T) []string {
				var vs []string
				for _, v := range fs.tags(r) {
					vs = append(vs, v)
				}
				return vs
			}
		default:
			return nil, badRequest("InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
		cs = append(cs, compiled{get, f.values})
	}
	return func(r T) bool {
		for _, c := range cs {
			if !anyMatch(c.values, c.get(r)) {
				return false
			}
		}
		return true
	}, nil
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if glob(p, v) {
				return true
			}
		}
	}
	return false
}

// glob matches EC2 filter wildcards: * any run of characters, ? one character.
func glob(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == s
	}
	p, v := []rune(pattern), []rune(s)
	var pi, vi, star, mark = 0, 0, -1, 0
	for vi < len(v) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == v[vi]):
			pi++
			vi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, vi
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			vi = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func boolString(b bool) string { return strconv.FormatBool(b) }

// pager is a request's MaxResults and NextToken, read before the request is
// checked for unknown parameters and applied after.
type pager struct {
	offset, limit int
}

// readPage reads MaxResults (validated against the action's range) and NextToken.
// Without MaxResults, def items per page (0: all of them).
func readPage(q *queryParams, lo, hi, def int) (pager, error) {
	limit, set, err := q.optInt("MaxResults")
	if err != nil {
		return pager{}, err
	}
	if set && (limit < lo || limit > hi) {
		return pager{}, badRequest("InvalidParameterValue", "Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", limit, lo, hi)
	}
	if !set {
		limit = def
	}
	offset, err := decodeToken(q.str("NextToken"))
	if err != nil {
		return pager{}, err
	}
	return pager{offset: offset, limit: limit}, nil
}

func pageOf[T any](items []T, p pager) ([]T, string) {
	return cut(items, p.offset, p.limit)
}

func cut[T any](items []T, offset, limit int) ([]T, string) {
	if offset > len(items) {
		offset = len(items)
	}
	items = items[offset:]
	if limit <= 0 || len(items) <= limit {
		return items, ""
	}
	return items[:limit], encodeToken(offset + limit)
}

// Tokens are opaque to clients; the fake's carry an offset.
func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("fakeaws:" + strconv.Itoa(offset)))
}

func decodeToken(token string) (int, error) {
	if token == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		if rest, ok := strings.CutPrefix(string(raw), "fakeaws:"); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	return 0, badRequest("InvalidNextToken", "The token '%s' is invalid.", token)
}
