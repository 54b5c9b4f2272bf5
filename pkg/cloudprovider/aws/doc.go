// Package aws is the AWS cloud provider: it launches EC2 instances for NodeClaims
// whose NodeClass is a karpenter.k8s.aws EC2NodeClass, on aws-sdk-go-v2.
//
// The decisions are pure functions over SDK types and API objects, each in the file
// of its concern: instance types and their labels (instancetypes.go), prices
// (pricing.go), NodeClass resolution and status (nodeclass.go), launch templates and
// fleet requests (launch.go), bootstrap user data (userdata.go) and drift
// (drift.go). CloudProvider (cloudprovider.go) and the NodeClass status controller
// (controller.go) gather from EC2, SSM, IAM, EKS and the Pricing API, call those
// functions and act on what they return.
package aws
