// Command tailor is the Tailor node autoscaler. Subcommands:
//
//	tailor controller  run the autoscaler against a cluster
//	tailor convert     turn Karpenter's older APIs into v1 NodePools and EC2NodeClasses
//	tailor sandbox     a local cluster with Tailor: up, down, status, demo
//	tailor simulate    plan nodes for manifests, offline
//	tailor version     print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "controller":
		opts, err := parseController(args[1:], stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if err := runController(opts, stderr); err != nil {
			fmt.Fprintln(stderr, "tailor controller:", err)
			return 1
		}
		return 0
	case "sandbox":
		return runSandbox(args[1:], stdout, stderr)
	case "convert":
		opts, err := parseConvert(args[1:], stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if err := runConvert(opts, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "tailor convert:", err)
			return 1
		}
		return 0
	case "simulate":
		opts, err := parseSimulate(args[1:], stderr)
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if err := runSimulate(context.Background(), opts, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "tailor simulate:", err)
			return 1
		}
		return 0
	case "version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "tailor: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: tailor <command>

commands:
  controller  run the autoscaler against a cluster
  convert     turn Karpenter's older APIs (Provisioner, AWSNodeTemplate, v1beta1) into v1
  sandbox     a local control plane with kwok and Tailor: up, down, status, demo
  simulate    plan nodes for pods, NodePools and nodes read from manifests
  version     print the version`)
}
