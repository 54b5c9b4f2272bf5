package aws

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// BootLog is what the instance printed to its serial console while it booted
// (EC2 GetConsoleOutput, the latest output), so a claim whose node never registered
// can say why: a boot script that failed, nodeadm or the kubelet refusing their
// configuration. EC2 keeps the last 64 KB.
func (c *CloudProvider) BootLog(ctx context.Context, providerID string) (string, error) {
	id, err := ParseProviderID(providerID)
	if err != nil {
		return "", err
	}
	out, err := c.aws.EC2.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: aws.String(id), Latest: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("reading the console output of %s: %w", id, err)
	}
	text, err := base64.StdEncoding.DecodeString(aws.ToString(out.Output))
	if err != nil {
		return "", fmt.Errorf("the console output of %s is not base64: %w", id, err)
	}
	return string(text), nil
}
