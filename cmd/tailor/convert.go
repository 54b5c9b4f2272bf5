package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodetailor/tailor/pkg/convert"
)

// convertOptions are the flags of `tailor convert`, parsed once.
type convertOptions struct {
	files []string
	// format is yaml or json (-o); outputFile, when set, is written instead of stdout.
	format     string
	outputFile string
	opts       convert.Options
}

// maxConvertInput bounds what convert reads, over all files.
const maxConvertInput = 64 << 20

func newConvertCommand(s streams, run func(*convertOptions) error) *cobra.Command {
	o := &convertOptions{format: "yaml"}
	cmd := &cobra.Command{
		Use:   "convert -f FILE_OR_DIR [-f ...] [-o yaml|json] [--output-file FILE] [--role ROLE | --instance-profile NAME]",
		Short: "turn Karpenter's older APIs (Provisioner, AWSNodeTemplate, v1beta1) into v1",
		Long: `Converts Karpenter's older APIs to the ones Tailor serves: karpenter.sh/v1alpha5
Provisioners and karpenter.k8s.aws/v1alpha1 AWSNodeTemplates, and v1beta1 NodePools,
NodeClaims and EC2NodeClasses, become karpenter.sh/v1 NodePools and NodeClaims and
karpenter.k8s.aws/v1 EC2NodeClasses; other objects pass through unchanged. Writes
multi-document YAML (-o json: one v1 List of the objects, as kubectl prints several),
and on stderr one line for each thing that could not be carried over or changed
meaning, naming the object and the field.`,
		Example: `  tailor convert -f provisioners.yaml --role KarpenterNodeRole-demo --output-file v1.yaml
  kubectl get provisioners,awsnodetemplates -o yaml | tailor convert -f - --role KarpenterNodeRole-demo -o json`,
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
	fs.VarP(convertFormat{enumValue{&o.format, []string{"yaml", "json"}}}, "output", "o", "output format: yaml (multi-document) or json (one v1 List)")
	fs.StringVar(&o.outputFile, "output-file", "", "write the converted manifests to this `FILE` instead of stdout")
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
	out := res.YAML()
	if o.format == "json" {
		if out, err = jsonList(res.Documents); err != nil {
			return err
		}
	}
	if o.outputFile == "" {
		_, err = s.out.Write(out)
		return err
	}
	return os.WriteFile(o.outputFile, out, 0o644)
}

// convertFormat is convert's -o: a format, as simulate's. Before, -o named the output
// file, so a value that looks like a file name gets a hint.
type convertFormat struct{ enumValue }

func (f convertFormat) Set(v string) error {
	err := f.enumValue.Set(v)
	if err != nil && strings.ContainsAny(v, "./") {
		return fmt.Errorf("%w (-o is the format: write to a file with --output-file %s)", err, v)
	}
	return err
}

// jsonList renders YAML documents as one v1 List, indented as kubectl prints one;
// kubectl apply -f takes it. Empty documents are left out.
func jsonList(docs [][]byte) ([]byte, error) {
	list := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}{APIVersion: "v1", Kind: "List", Items: []json.RawMessage{}}
	for i, doc := range docs {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("output document %d: %w", i+1, err)
		}
		if js = bytes.TrimSpace(js); len(js) == 0 || string(js) == "null" {
			continue
		}
		list.Items = append(list.Items, js)
	}
	out, err := json.MarshalIndent(list, "", "    ")
	return append(out, '\n'), err
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
