package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/nodetailor/tailor/pkg/sandbox"
)

func runSandbox(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: tailor sandbox up|down|status|demo [--dir DIR]")
		return 2
	}
	fs := flag.NewFlagSet("sandbox "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", sandbox.DefaultDir(), "where the sandbox keeps its data, logs, pids and kubeconfig")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "up":
		self, exeErr := os.Executable()
		if exeErr != nil {
			err = exeErr
			break
		}
		upCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		err = sandbox.Up(upCtx, sandbox.Options{Dir: *dir, Tailor: self}, stdout)
	case "down":
		err = sandbox.Down(*dir, stdout)
	case "status":
		err = sandbox.Status(*dir, stdout)
	case "demo":
		tty := false
		if f, ok := stdout.(*os.File); ok {
			tty = term.IsTerminal(int(f.Fd()))
		}
		err = sandbox.Demo(ctx, sandbox.Kubeconfig(*dir), stdout, tty)
	default:
		fmt.Fprintf(stderr, "tailor sandbox: unknown command %q (up, down, status, demo)\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "tailor sandbox "+args[0]+":", err)
		return 1
	}
	return 0
}
