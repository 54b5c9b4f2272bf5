package fakeaws

import (
	"fmt"
	"time"
)

// ExamplesVPC is the VPC Karpenter's security-group-with-vpc example selects its
// security groups in.
const ExamplesVPC = "vpc-12345678"

// KarpenterExamples edits an inventory to hold what Karpenter's public AWS
// examples (examples/aws-karpenter) select beyond the default one, once their
// cluster name is the cluster's:
//   - the VPC is ExamplesVPC, holding a security group named k8s-node and one
//     tagged Environment=production beside the discovery tag;
//   - the account's own AMIs ami-123 (x86_64) and ami-456 (arm64), built from the
//     EKS AL2 image;
//   - the AL2023 release v20240625 (the pinned alias al2023@v20240625);
//   - the EKS-optimized Windows Server 2019, 2022 and 2025 images (amd64 only, as
//     EKS publishes them) and Bottlerocket's FIPS images, with the SSM parameters
//     that name them.
func KarpenterExamples(cluster, kubernetesVersion, accountID string) func(*Inventory) {
	return func(inv *Inventory) {
		old := inv.VPCID
		inv.VPCID = ExamplesVPC
		for i := range inv.Subnets {
			if inv.Subnets[i].VPCID == old {
				inv.Subnets[i].VPCID = ExamplesVPC
			}
		}
		for i := range inv.SecurityGroups {
			if inv.SecurityGroups[i].VPCID == old {
				inv.SecurityGroups[i].VPCID = ExamplesVPC
			}
		}
		inv.SecurityGroups = append(inv.SecurityGroups,
			SecurityGroup{ID: stableID("sg", "k8s-node/"+ExamplesVPC), Name: "k8s-node", VPCID: ExamplesVPC,
				Description: "Kubernetes nodes", Tags: map[string]string{"Name": "k8s-node"}},
			SecurityGroup{ID: stableID("sg", "production/"+cluster), Name: cluster + "-production", VPCID: ExamplesVPC,
				Description: "production workloads",
				Tags:        map[string]string{"karpenter.sh/discovery": cluster, "Environment": "production"}},
		)

		// Fixed dates: these images are older than the default ones, so an alias
		// at latest never picks them.
		released := time.Date(2024, 6, 25, 0, 0, 0, 0, time.UTC)
		image := func(id, name, arch, owner, alias, root string, size int32) Image {
			return Image{ID: id, Name: name, Architecture: arch, OwnerID: owner, OwnerAlias: alias, CreationDate: released,
				RootDeviceName: root, BlockDevices: []ImageBlockDevice{
					{DeviceName: root, SnapshotID: stableID("snap", name), VolumeSize: size, VolumeType: "gp3"}}}
		}
		for _, c := range []struct{ id, arch string }{{"ami-123", "x86_64"}, {"ami-456", "arm64"}} {
			im := image(c.id, "custom-eks-al2-"+c.arch, c.arch, accountID, "", "/dev/xvda", 20)
			im.Description = "a custom image built from the EKS-optimized AL2 image"
			inv.Images = append(inv.Images, im)
		}

		v := kubernetesVersion
		if v == "" {
			v = defaultKubernetesVersion // as the server defaults the cluster's
		}
		for _, arch := range []string{"x86_64", "arm64"} {
			name := fmt.Sprintf("amazon-eks-node-al2023-%s-standard-%s-v20240625", arch, v)
			im := image(stableID("ami", name), name, arch, eksImageOwner, "amazon", "/dev/xvda", 20)
			im.Description = fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, variant: standard)", v)
			inv.Images = append(inv.Images, im)
			inv.SSMParameters[fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/%s/image_id", v, arch, name)] = im.ID

			for _, flavor := range []string{"-fips", "-nvidia-fips"} {
				variant := "aws-k8s-" + v + flavor
				name := fmt.Sprintf("bottlerocket-%s-%s-v%s", variant, arch, bottlerocketRelease)
				im := image(stableID("ami", name), name, arch, bottlerocketOwner, "amazon", "/dev/xvda", 2)
				im.Description = "bottlerocket FIPS"
				im.BlockDevices = append(im.BlockDevices, ImageBlockDevice{DeviceName: "/dev/xvdb", SnapshotID: stableID("snap", name+"/data"), VolumeSize: 20, VolumeType: "gp3"})
				inv.Images = append(inv.Images, im)
				base := fmt.Sprintf("/aws/service/bottlerocket/%s/%s/", variant, arch)
				inv.SSMParameters[base+"latest/image_id"] = im.ID
				inv.SSMParameters[base+bottlerocketRelease+"/image_id"] = im.ID
			}
		}
		for _, year := range []string{"2019", "2022", "2025"} {
			param := fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s", year, v)
			name := param + "-2025.08.12"
			im := image(stableID("ami", name), name, "x86_64", windowsImageOwner, "amazon", "/dev/sda1", 50)
			im.Platform = "windows"
			im.Description = fmt.Sprintf("Microsoft Windows Server %s Core optimized for EKS and Kubernetes %s", year, v)
			inv.Images = append(inv.Images, im)
			inv.SSMParameters["/aws/service/ami-windows-latest/"+param+"/image_id"] = im.ID
		}
	}
}

// windowsImageOwner owns Amazon's public Windows images.
const windowsImageOwner = "801119661308"
