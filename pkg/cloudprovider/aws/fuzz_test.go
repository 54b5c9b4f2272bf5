package aws

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// Any provider ID that parses names the instance it was made from.
func FuzzProviderID(f *testing.F) {
	f.Add("us-east-1a", "i-0123456789abcdef0")
	f.Add("", "i-")
	f.Fuzz(func(t *testing.T, zone, id string) {
		got, err := ParseProviderID(ProviderID(zone, id))
		if err == nil && !strings.HasSuffix(id, got) {
			t.Errorf("ProviderID(%q, %q) parsed as %q", zone, id, got)
		}
	})
}

// Whatever the user's AL2023 user data, Tailor's NodeConfig is the last part of
// a MIME document, or the user data is refused.
func FuzzAL2023UserData(f *testing.F) {
	f.Add("#!/bin/bash\necho hi\n")
	f.Add("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\necho one\n--B--\n")
	f.Add("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n")
	f.Fuzz(func(t *testing.T, user string) {
		doc, err := UserData(testBootstrap(awsv1.AMIFamilyAL2023, aws.String(user)))
		if err != nil {
			return
		}
		types, bodies := mimeParts(t, doc)
		if len(types) == 0 || types[len(types)-1] != "application/node.eks.aws" || !strings.Contains(bodies[len(bodies)-1], "kind: NodeConfig") {
			t.Errorf("the last part is not Tailor's NodeConfig: %v", types)
		}
	})
}
