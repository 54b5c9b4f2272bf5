package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodetailor/tailor/pkg/convert"
)

// convertOptions are the flags of `tailor convert`, parsed once.
type convertOptions struct {
	files  []string
	output string
	opts   convert.Options
}

// maxConvertInput bounds what convert reads, over all files.
const maxConvertInput = 64 << 20

func newConvertCommand(s streams, run func(*convertOptions) error) *cobra.Command {
	o := &convertOptions{}
	cmd := &cobra.Command{
		Use:   "convert -f FILE_OR_DIR [-f ...] [-o FILE] [--role ROLE | --instance-profile NAME]",
		Short: "turn Karpenter's older APIs (Provisioner, AWSNodeTemplate, v1beta1) into v1",
		Long: `Converts Karpenter's older APIs to the ones Tailor serves: karpenter.sh/v1alpha5
Provisioners and karpenter.k8s.aws/v1alpha1 AWSNodeTemplates, and v1beta1 NodePools,
NodeClaims and EC2NodeClasses, become karpenter.sh/v1 NodePools and NodeClaims and
karpenter.k8s.aws/v1 EC2NodeClasses; other objects pass through unchanged. Writes
multi-document YAML, and on stderr one line for each thing that could not be carried
over or changed meaning, naming the object and the field.`,
		Example: `  tailor convert -f provisioners.yaml --role KarpenterNodeRole-demo -o v1.yaml
  kubectl get provisioners,awsnodetemplates -o yaml | tailor convert -f - --role KarpenterNodeRole-demo`,
		Args: noArgs("; pass manifests with -f"),
		RunE: func(*cobra.Command, []string) error {
			if len(o.files) == 0 {
				return errors.New("at least one -f is required")
			}
			if n := countStdin(o.files); n > 1 {
				return fmt.Errorf("-f - given %d times; standard input can be read once", n)
			}
			if o.opts.Role != "" && o.opts.InstanceProfile != "" {
				return errors.New("--role and --instance-profile: give one")
			}
			return run(o)
		},
	}
	fs := cmd.Flags()
	addFileFlag(fs, &o.files, "YAML or JSON")
	fs.StringVarP(&o.output, "output-file", "o", "", "write the converted manifests to this file instead of stdout")
	fs.StringVar(&o.opts.Role, "role", "", "the IAM role for EC2NodeClasses made from AWSNodeTemplates that name no instance profile (they used the install's default one, which v1 does not have), e.g. KarpenterNodeRole-CLUSTER")
	fs.StringVar(&o.opts.InstanceProfile, "instance-profile", "", "instead of --role: the instance profile for those EC2NodeClasses (the old defaultInstanceProfile setting)")
	return cmd
}

func runConvert(o *convertOptions, s streams) error {
	var inputs []convert.Input
	left := int64(maxConvertInput)
	for _, p := range o.files {
		if p == "-" {
			data, err := readLimited(stdinName, s.in, &left)
			if err != nil {
				return err
			}
			inputs = append(inputs, convert.Input{Name: stdinName, Data: data})
			continue
		}
		files, err := convertFiles(p)
		if err != nil {
			return err
		}
		for _, f := range files {
			data, err := readBounded(f, &left)
			if err != nil {
				return err
			}
			inputs = append(inputs, convert.Input{Name: f, Data: data})
		}
	}
	res, err := convert.Convert(inputs, o.opts)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(s.err, w.String())
	}
	if o.output == "" {
		_, err = s.out.Write(res.YAML())
		return err
	}
	return os.WriteFile(o.output, res.YAML(), 0o644)
}

// convertFiles lists a file, or a directory's YAML and JSON files in name order.
func convertFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); !d.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".json")) {
			files = append(files, p)
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

// readBounded reads a regular file, charging it to what is left of the input bound.
func readBounded(path string, left *int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(path, f, left)
}

// readLimited reads r, named name in errors, charging it to what is left of the
// input bound.
func readLimited(name string, r io.Reader, left *int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, *left+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > *left {
		return nil, fmt.Errorf("%s: the input exceeds %d MiB over all files", name, maxConvertInput>>20)
	}
	*left -= int64(len(data))
	return data, nil
}
