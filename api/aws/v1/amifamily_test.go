package v1_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

func TestParseAlias(t *testing.T) {
	for _, tc := range []struct {
		alias string
		want  awsv1.Alias
		err   bool
	}{
		{alias: "al2@latest", want: awsv1.Alias{Family: awsv1.AMIFamilyAL2, Version: "latest"}},
		{alias: "al2023@v20240625", want: awsv1.Alias{Family: awsv1.AMIFamilyAL2023, Version: "v20240625"}},
		{alias: "bottlerocket@v1.20.3", want: awsv1.Alias{Family: awsv1.AMIFamilyBottlerocket, Version: "v1.20.3"}},
		// The FIPS image variant is the Bottlerocket family, not a family of its own.
		{alias: "bottlerocket-fips@latest", want: awsv1.Alias{Family: awsv1.AMIFamilyBottlerocket, FIPS: true, Version: "latest"}},
		{alias: "bottlerocket-fips@v1.20.3", want: awsv1.Alias{Family: awsv1.AMIFamilyBottlerocket, FIPS: true, Version: "v1.20.3"}},
		{alias: "windows2019@latest", want: awsv1.Alias{Family: awsv1.AMIFamilyWindows2019, Version: "latest"}},
		{alias: "windows2022@latest", want: awsv1.Alias{Family: awsv1.AMIFamilyWindows2022, Version: "latest"}},
		{alias: "windows2025@latest", want: awsv1.Alias{Family: awsv1.AMIFamilyWindows2025, Version: "latest"}},
		// Everything after the first @ is the version, as the CRD's pattern allows.
		{alias: "al2023@v1@x", want: awsv1.Alias{Family: awsv1.AMIFamilyAL2023, Version: "v1@x"}},
		{alias: "al2023", err: true},
		{alias: "al2023@", err: true},
		{alias: "@latest", err: true},
		{alias: "AL2023@latest", err: true}, // the CRD takes lower case only
		{alias: "custom@latest", err: true},
		{alias: "ubuntu@latest", err: true},
		{alias: "bottlerocket-fips", err: true},
		{alias: "bottlerocket-FIPS@latest", err: true},
		{alias: "al2023-fips@latest", err: true},
		{alias: "-@latest", err: true},
		{alias: "windows2022@v20240101", err: true},
		{alias: "", err: true},
	} {
		t.Run(tc.alias, func(t *testing.T) {
			got, err := awsv1.ParseAlias(tc.alias)
			if (err != nil) != tc.err {
				t.Fatalf("ParseAlias(%q) = %v, %v; want error %v", tc.alias, got, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseAlias(%q) (-want +got):\n%s", tc.alias, diff)
			}
			if err == nil && !strings.Contains(got.Version, "@") && got.String() != tc.alias {
				t.Errorf("String() = %q, want the alias back, %q", got.String(), tc.alias)
			}
		})
	}
}

func nodeClass(family *string, terms ...awsv1.AMISelectorTerm) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "default"
	nc.Spec.AMIFamily = family
	nc.Spec.AMISelectorTerms = terms
	return nc
}

func TestAMIFamily(t *testing.T) {
	for name, tc := range map[string]struct {
		nc        *awsv1.EC2NodeClass
		family    string
		alias     *awsv1.Alias
		aliasFail bool
	}{
		"from the alias": {nc: nodeClass(nil, awsv1.AMISelectorTerm{Alias: "al2023@latest"}),
			family: awsv1.AMIFamilyAL2023, alias: &awsv1.Alias{Family: awsv1.AMIFamilyAL2023, Version: "latest"}},
		"pinned bottlerocket": {nc: nodeClass(nil, awsv1.AMISelectorTerm{Alias: "bottlerocket@v1.20.3"}),
			family: awsv1.AMIFamilyBottlerocket, alias: &awsv1.Alias{Family: awsv1.AMIFamilyBottlerocket, Version: "v1.20.3"}},
		"bottlerocket fips": {nc: nodeClass(nil, awsv1.AMISelectorTerm{Alias: "bottlerocket-fips@latest"}),
			family: awsv1.AMIFamilyBottlerocket, alias: &awsv1.Alias{Family: awsv1.AMIFamilyBottlerocket, FIPS: true, Version: "latest"}},
		"windows 2025": {nc: nodeClass(nil, awsv1.AMISelectorTerm{Alias: "windows2025@latest"}),
			family: awsv1.AMIFamilyWindows2025, alias: &awsv1.Alias{Family: awsv1.AMIFamilyWindows2025, Version: "latest"}},
		// Custom with an alias boots the family's image but bootstraps nothing.
		"custom over an alias": {nc: nodeClass(ptr.To(awsv1.AMIFamilyCustom), awsv1.AMISelectorTerm{Alias: "bottlerocket@latest"}),
			family: awsv1.AMIFamilyCustom, alias: &awsv1.Alias{Family: awsv1.AMIFamilyBottlerocket, Version: "latest"}},
		"explicit family agreeing with the alias": {nc: nodeClass(ptr.To(awsv1.AMIFamilyAL2), awsv1.AMISelectorTerm{Alias: "al2@latest"}),
			family: awsv1.AMIFamilyAL2, alias: &awsv1.Alias{Family: awsv1.AMIFamilyAL2, Version: "latest"}},
		"explicit family, images by id": {nc: nodeClass(ptr.To(awsv1.AMIFamilyAL2), awsv1.AMISelectorTerm{ID: "ami-123"}, awsv1.AMISelectorTerm{ID: "ami-456"}),
			family: awsv1.AMIFamilyAL2},
		"ssm parameter": {nc: nodeClass(ptr.To(awsv1.AMIFamilyAL2023), awsv1.AMISelectorTerm{SSMParameter: "/my/ami"}),
			family: awsv1.AMIFamilyAL2023},
		// Objects the CRD refuses: the helpers say so instead of guessing.
		"no family, no alias": {nc: nodeClass(nil, awsv1.AMISelectorTerm{ID: "ami-123"}), family: ""},
		"malformed alias":     {nc: nodeClass(nil, awsv1.AMISelectorTerm{Alias: "al2023"}), family: "", aliasFail: true},
		"malformed alias, explicit family": {nc: nodeClass(ptr.To(awsv1.AMIFamilyAL2023), awsv1.AMISelectorTerm{Alias: "ubuntu@latest"}),
			family: awsv1.AMIFamilyAL2023, aliasFail: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.nc.AMIFamily(); got != tc.family {
				t.Errorf("AMIFamily() = %q, want %q", got, tc.family)
			}
			alias, err := tc.nc.Alias()
			if (err != nil) != tc.aliasFail {
				t.Fatalf("Alias() error = %v, want error %v", err, tc.aliasFail)
			}
			if diff := cmp.Diff(tc.alias, alias); diff != "" {
				t.Errorf("Alias() (-want +got):\n%s", diff)
			}
		})
	}
}
