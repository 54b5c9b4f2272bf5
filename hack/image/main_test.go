package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// crossCompile builds a small static Go program for each platform into dir, named
// as `make image` names tailor's binaries.
func crossCompile(t *testing.T, dir string, platforms []string) {
	t.Helper()
	src := smallProgram(t, "func main() { println(\"small\") }\n")
	for _, p := range platforms {
		osName, arch, _ := strings.Cut(p, "/")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "tailor-"+osName+"-"+arch), ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+osName, "GOARCH="+arch, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building for %s: %v\n%s", p, err, out)
		}
	}
}

// smallProgram writes a main package of one file, body after its package clause,
// into a module of its own, and returns the module's directory.
func smallProgram(t *testing.T, body string) string {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module small\n\ngo 1.25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

func TestBuildAndReadBack(t *testing.T) {
	platforms := []string{"linux/amd64", "linux/arm64"}
	bins := t.TempDir()
	crossCompile(t, bins, platforms)
	certs := filepath.Join(t.TempDir(), "ca.pem")
	certData := []byte("-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n")
	if err := os.WriteFile(certs, certData, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Binaries: bins, Platforms: platforms, CACerts: certs, Ref: "registry.example.com/tailor:v1.2.3",
		Version: "v1.2.3", Revision: "0123abcd", Created: "2026-01-02T03:04:05Z", Source: "https://example.com/tailor"}
	idx, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	dir, tarPath := filepath.Join(out, "layout"), filepath.Join(out, "image.tar")
	if err := WriteLayout(dir, idx, opts.Ref); err != nil {
		t.Fatal(err)
	}
	if err := TarDir(dir, tarPath); err != nil {
		t.Fatal(err)
	}

	// The layout, read back as a registry client would.
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != opts.Ref {
		t.Fatalf("layout index %+v, want one entry named %s", topManifest.Manifests, opts.Ref)
	}
	read, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, read, platforms, opts, bins, certData)

	// The tarball is the same layout: unpacked, it holds the same index.
	unpacked := filepath.Join(out, "unpacked")
	untar(t, tarPath, unpacked)
	p2, err := layout.FromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	top2, err := p2.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := top.Digest()
	d2, err := top2.Digest()
	if err != nil || d1 != d2 {
		t.Errorf("tarball's index %s (%v), layout's %s", d2, err, d1)
	}

	// Equal inputs, equal image.
	again, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if got, _ := again.Digest(); got != want {
		t.Errorf("a second build has digest %s, the first %s", got, want)
	}
}

func checkIndex(t *testing.T, idx v1.ImageIndex, platforms []string, opts Options, bins string, certs []byte) {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s", m.MediaType)
	}
	if len(m.Manifests) != len(platforms) {
		t.Fatalf("%d manifests, want %d", len(m.Manifests), len(platforms))
	}
	for i, desc := range m.Manifests {
		osName, arch, _ := strings.Cut(platforms[i], "/")
		if desc.Platform == nil || desc.Platform.OS != osName || desc.Platform.Architecture != arch {
			t.Errorf("manifest %d: platform %+v, want %s", i, desc.Platform, platforms[i])
			continue
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
			t.Errorf("%s: manifest media type %s", platforms[i], mt)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != osName || cfg.Architecture != arch {
			t.Errorf("%s: config says %s/%s", platforms[i], cfg.OS, cfg.Architecture)
		}
		uid, _, _ := strings.Cut(cfg.Config.User, ":")
		if uid == "" || uid == "0" || uid == "root" {
			t.Errorf("%s: runs as user %q", platforms[i], cfg.Config.User)
		}
		if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/tailor" {
			t.Errorf("%s: entrypoint %v", platforms[i], cfg.Config.Entrypoint)
		}
		for k, v := range map[string]string{"org.opencontainers.image.version": opts.Version,
			"org.opencontainers.image.revision": opts.Revision, "org.opencontainers.image.created": opts.Created,
			"org.opencontainers.image.source": opts.Source} {
			if cfg.Config.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", platforms[i], k, cfg.Config.Labels[k], v)
			}
		}
		files := filesOf(t, img)
		bin, ok := files["tailor"]
		if !ok {
			t.Errorf("%s: no /tailor in the image (files %v)", platforms[i], keys(files))
			continue
		}
		if bin.mode&0o111 == 0 {
			t.Errorf("%s: /tailor has mode %o", platforms[i], bin.mode)
		}
		want, err := os.ReadFile(filepath.Join(bins, "tailor-"+osName+"-"+arch))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bin.data, want) {
			t.Errorf("%s: /tailor is not the platform's binary", platforms[i])
		}
		if ef, err := elf.NewFile(bytes.NewReader(bin.data)); err != nil || ef.Machine != machines[arch] {
			t.Errorf("%s: /tailor is not an ELF for %s (%v)", platforms[i], arch, err)
		}
		for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/sh"} {
			if _, ok := files[shell]; ok {
				t.Errorf("%s: the image has a shell, /%s", platforms[i], shell)
			}
		}
		if !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, certs) {
			t.Errorf("%s: no CA certificates", platforms[i])
		}
		if !strings.Contains(string(files["etc/passwd"].data), ":65532:65532:") {
			t.Errorf("%s: /etc/passwd has no entry for uid 65532", platforms[i])
		}
		if tmp, ok := files["tmp"]; !ok || tmp.mode&0o1777 != 0o1777 {
			t.Errorf("%s: /tmp missing or not world-writable", platforms[i])
		}
	}
}

type file struct {
	mode int64
	data []byte
}

// filesOf reads the image's flattened filesystem.
func filesOf(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")] = file{mode: h.Mode, data: data}
	}
}

func keys(m map[string]file) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			t.Fatalf("tar entry %s escapes the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, data, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("tar entry %s of type %c", h.Name, h.Typeflag)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	bins := t.TempDir()
	crossCompile(t, bins, []string{"linux/amd64"})
	// An arm64 binary where the amd64 one belongs, and a file that is no binary.
	wrongArch, notELF := t.TempDir(), t.TempDir()
	crossCompile(t, wrongArch, []string{"linux/arm64"})
	if err := os.Rename(filepath.Join(wrongArch, "tailor-linux-arm64"), filepath.Join(wrongArch, "tailor-linux-amd64")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notELF, "tailor-linux-amd64"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(bins, "ca.pem")
	if err := os.WriteFile(certs, []byte("pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := Options{Binaries: bins, Platforms: []string{"linux/amd64"}, CACerts: certs, Created: "2026-01-02T03:04:05Z"}
	if _, err := Build(base); err != nil {
		t.Fatalf("the base options: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"missing binary", func(o *Options) { o.Platforms = []string{"linux/amd64", "linux/arm64"} }, "platform linux/arm64: reading its binary"},
		{"binary of another architecture", func(o *Options) { o.Binaries = wrongArch }, "platform linux/amd64: " + filepath.Join(wrongArch, "tailor-linux-amd64") + ": built for EM_AARCH64, not amd64"},
		{"not a binary", func(o *Options) { o.Binaries = notELF }, "not an ELF binary"},
		{"bad platform", func(o *Options) { o.Platforms = []string{"amd64"} }, `platform "amd64": want os/arch`},
		{"repeated platform", func(o *Options) { o.Platforms = []string{"linux/amd64", "linux/amd64"} }, "given twice"},
		{"bad time", func(o *Options) { o.Created = "yesterday" }, `created "yesterday"`},
		{"no certificates", func(o *Options) { o.CACerts = filepath.Join(bins, "none.pem") }, "reading the CA certificates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mutate(&o)
			if _, err := Build(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A dynamically linked binary (cgo on) is refused: the image has no loader and no
// libc for it.
func TestBuildRefusesDynamic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds a cgo binary for this machine, which must be Linux")
	}
	src := smallProgram(t, "// #include <stdlib.h>\nimport \"C\"\n\nfunc main() { C.free(nil) }\n")
	bins := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bins, "tailor-linux-"+runtime.GOARCH), ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("no cgo build here (a C compiler is needed): %v\n%s", err, out)
	}
	certs := filepath.Join(bins, "ca.pem")
	if err := os.WriteFile(certs, []byte("pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(Options{Binaries: bins, Platforms: []string{"linux/" + runtime.GOARCH}, CACerts: certs, Created: "2026-01-02T03:04:05Z"})
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("error %v, want one saying the binary is dynamically linked", err)
	}
}
