package v1

import (
	"fmt"
	"strings"
)

// AMI families: the values of spec.amiFamily.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
	// AMIFamilyCustom bootstraps nothing: the user data is used as written.
	AMIFamilyCustom = "Custom"
)

// AliasVersionLatest is the alias version that follows the newest release.
const AliasVersionLatest = "latest"

// aliasFamilies maps the family part of an alias, which the CRD only accepts in lower
// case, to its AMI family and image variant. Custom has no alias: it has no image of
// its own.
var aliasFamilies = map[string]Alias{
	"al2":               {Family: AMIFamilyAL2},
	"al2023":            {Family: AMIFamilyAL2023},
	"bottlerocket":      {Family: AMIFamilyBottlerocket},
	"bottlerocket-fips": {Family: AMIFamilyBottlerocket, FIPS: true},
	"windows2019":       {Family: AMIFamilyWindows2019},
	"windows2022":       {Family: AMIFamilyWindows2022},
	"windows2025":       {Family: AMIFamilyWindows2025},
}

// Alias is a parsed amiSelectorTerms alias, "family@version".
type Alias struct {
	// Family is the AMI family (AL2023, Bottlerocket, …), not the alias's lower-case
	// spelling. bottlerocket-fips is the Bottlerocket family with FIPS set.
	Family string
	// FIPS selects the family's FIPS image variant (Bottlerocket's "-fips" SSM
	// parameters); nodes bootstrap as the family does.
	FIPS bool
	// Version is the release ("v20240625", "v1.20.3") or AliasVersionLatest.
	Version string
}

// String gives the alias as written in an EC2NodeClass: "al2023@latest",
// "bottlerocket-fips@v1.20.3".
func (a Alias) String() string {
	name := strings.ToLower(a.Family)
	if a.FIPS {
		name += "-fips"
	}
	return name + "@" + a.Version
}

// ParseAlias parses "family@version" by the rules the CRD enforces: a known
// lower-case family, a non-empty version, and only "latest" for Windows.
func ParseAlias(s string) (Alias, error) {
	name, version, ok := strings.Cut(s, "@")
	if !ok || name == "" || version == "" {
		return Alias{}, fmt.Errorf("alias %q is not of the form family@version", s)
	}
	a, ok := aliasFamilies[name]
	if !ok {
		return Alias{}, fmt.Errorf("alias %q: family %q is not one of al2, al2023, bottlerocket, bottlerocket-fips, windows2019, windows2022, windows2025", s, name)
	}
	// The CRD compares the text between the first and a second "@" with "latest".
	if strings.HasPrefix(name, "windows") && strings.Split(version, "@")[0] != AliasVersionLatest {
		return Alias{}, fmt.Errorf("alias %q: windows families may only use version %q", s, AliasVersionLatest)
	}
	a.Version = version
	return a, nil
}

// Alias is the alias term of spec.amiSelectorTerms, parsed; nil without error when
// there is none. The CRD allows an alias only as the only term, so there is at most
// one.
func (in *EC2NodeClass) Alias() (*Alias, error) {
	for _, term := range in.Spec.AMISelectorTerms {
		if term.Alias == "" {
			continue
		}
		a, err := ParseAlias(term.Alias)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: spec.amiSelectorTerms: %w", in.Name, err)
		}
		return &a, nil
	}
	return nil, nil
}

// AMIFamily is the family nodes are bootstrapped as: spec.amiFamily when set (which
// may be Custom even with an alias), else the alias's family. It is "" only for an
// object the CRD would have refused (no amiFamily and no valid alias).
func (in *EC2NodeClass) AMIFamily() string {
	if in.Spec.AMIFamily != nil {
		return *in.Spec.AMIFamily
	}
	if a, err := in.Alias(); err == nil && a != nil {
		return a.Family
	}
	return ""
}
