// Package fakeaws is an HTTP server that speaks the AWS wire protocols Tailor's AWS
// cloud provider uses, so the provider can be tested through the real aws-sdk-go-v2
// clients (pointed at the server through their BaseEndpoint) instead of interface
// mocks.
//
// One endpoint serves every service, routed the way the SDK addresses them:
//   - EC2 (Query protocol, form-encoded Action=…&Version=2016-11-15, XML answers in the
//     http://ec2.amazonaws.com/doc/2016-11-15/ namespace),
//   - IAM (Query protocol, Version=2010-05-08),
//   - SQS (JSON 1.0, X-Amz-Target: AmazonSQS.<Action>, query-compatible errors),
//   - SSM and the Price List API (JSON 1.1, X-Amz-Target: AmazonSSM.* and
//     AWSPriceListService.*),
//   - EKS (REST-JSON, GET /clusters/{name}).
//
// Requests are parsed as AWS would parse them: a parameter the fake does not know is
// an UnknownParameter error, not silently ignored, so an SDK upgrade that changes a
// request shape fails a test here rather than in production. Signatures are not
// checked.
//
// The inventory (zones, subnets, security groups, AMIs with their SSM aliases,
// instance profiles, capacity reservations, an EKS cluster, and the EC2 instance
// types of the embedded catalog with network, GPU, processor and storage facts) is
// deterministic given Options.Seed. Instances move through EC2's states with time
// (Options.Clock, so tests can use a fake clock): pending, running, shutting-down,
// terminated, then forgotten.
//
// Knobs, safe to call while serving, inject what real clouds do to a provider:
// insufficient capacity per offering, throttling (the next N calls or a fraction),
// latency, eventual consistency (new instances invisible for a while), spot
// interruptions and the other EventBridge messages Karpenter handles, delivered to
// the interruption queue as EventBridge delivers them. Kubelet plays the kubelets of
// the instances against an API server, registering the Node each would; what each
// node boots with (or why it never joins) is decided by the eks-node-referee binary
// (hack/eksnode), which reads the user data with nodeadm's API types and checks the
// kubelet configuration with the kubelet's own code, never with Tailor's.
package fakeaws
