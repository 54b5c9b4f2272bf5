// Command image builds Tailor's container image without a Docker daemon: for each
// platform one layer holding the static tailor binary (and what a static Go binary
// needs from a filesystem: CA certificates, a passwd entry for its user, a /tmp),
// no shell and no package manager, run as a non-root user; the platforms' images
// under one OCI image index, written as an OCI image layout and as that layout in
// one tar file (what `skopeo copy oci-archive:…`, `crane push` and `docker load`
// take). See `make image`.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the controller runs as: distroless's "nonroot", which the chart's
// security context names too.
const (
	UID        = 65532
	User       = "65532:65532"
	Entrypoint = "/tailor"
)

// Options say what goes into the image.
type Options struct {
	// Binaries holds one static binary per platform, named tailor-<os>-<arch>.
	Binaries string
	// Platforms are os/arch pairs.
	Platforms []string
	// CACerts is a PEM bundle installed as /etc/ssl/certs/ca-certificates.crt, where
	// Go looks on Linux (the controller calls cloud APIs over TLS).
	CACerts string
	// Ref names the image (repository:tag) in the layout's index.
	Ref string
	// Version, Revision and Created become the OCI labels and annotations; Created
	// (RFC 3339) is also every file's modification time, so equal inputs give equal
	// digests.
	Version, Revision, Created string
	// Source is the repository URL of the org.opencontainers.image.source label.
	Source string
}

func main() {
	var o Options
	var platforms, layoutDir, tarPath string
	flag.StringVar(&o.Binaries, "binaries", "", "directory of the binaries, named tailor-<os>-<arch>")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch platforms")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates to install")
	flag.StringVar(&o.Ref, "image", "ghcr.io/nodetailor/tailor:dev", "image name, repository:tag")
	flag.StringVar(&o.Version, "version", "dev", "version label")
	flag.StringVar(&o.Revision, "revision", "unknown", "VCS revision label")
	flag.StringVar(&o.Created, "created", "", "creation time, RFC 3339 (default: now)")
	flag.StringVar(&o.Source, "source", "https://github.com/nodetailor/tailor", "source repository label")
	flag.StringVar(&layoutDir, "layout", "", "write the image as an OCI image layout into this directory (replaced)")
	flag.StringVar(&tarPath, "tarball", "", "write the OCI image layout as one tar file here")
	flag.Parse()
	if flag.NArg() > 0 {
		fatal(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	if layoutDir == "" {
		fatal(errors.New("-layout is required"))
	}
	o.Platforms = strings.Split(platforms, ",")
	if o.Created == "" {
		o.Created = time.Now().UTC().Format(time.RFC3339)
	}
	idx, err := Build(o)
	if err != nil {
		fatal(err)
	}
	if err := WriteLayout(layoutDir, idx, o.Ref); err != nil {
		fatal(err)
	}
	if tarPath != "" {
		if err := TarDir(layoutDir, tarPath); err != nil {
			fatal(err)
		}
	}
	digest, err := idx.Digest()
	if err != nil {
		fatal(err)
	}
	fmt.Printf("image: %s (%s), %s in %s\n", o.Ref, digest, strings.Join(o.Platforms, ", "), layoutDir)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// Build makes the image index of every platform's image.
func Build(o Options) (v1.ImageIndex, error) {
	created, err := time.Parse(time.RFC3339, o.Created)
	if err != nil {
		return nil, fmt.Errorf("created %q: want an RFC 3339 time: %w", o.Created, err)
	}
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platforms")
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificates: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "tailor",
		"org.opencontainers.image.description": "Tailor, a Kubernetes node autoscaler serving Karpenter's v1 API",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      o.Source,
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	seen := map[string]bool{}
	for _, p := range o.Platforms {
		osName, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || osName == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("platform %q: want os/arch, such as linux/arm64", p)
		}
		if seen[p] {
			return nil, fmt.Errorf("platform %q given twice", p)
		}
		seen[p] = true
		binPath := filepath.Join(o.Binaries, "tailor-"+osName+"-"+arch)
		bin, err := os.ReadFile(binPath)
		if err != nil {
			return nil, fmt.Errorf("platform %s: reading its binary: %w", p, err)
		}
		if osName == "linux" {
			if err := CheckStatic(bin, arch); err != nil {
				return nil, fmt.Errorf("platform %s: %s: %w", p, binPath, err)
			}
		}
		img, err := platformImage(bin, certs, created, osName, arch, labels)
		if err != nil {
			return nil, fmt.Errorf("platform %s: %w", p, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform:    &v1.Platform{OS: osName, Architecture: arch},
			Annotations: map[string]string{"org.opencontainers.image.revision": o.Revision},
		}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

// machines are the ELF machine of each architecture the image is built for.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// CheckStatic fails unless bin is a Linux binary for arch that runs in an image with
// no dynamic loader and no libraries: an ELF for the architecture's machine with no
// interpreter (PT_INTERP) and no shared library it needs (DT_NEEDED). A binary built
// with cgo on is not, and would fail to start in the image with a bare "no such file".
func CheckStatic(bin []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	if want, ok := machines[arch]; ok && f.Machine != want {
		return fmt.Errorf("built for %s, not %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked: it names an interpreter (PT_INTERP); build it with CGO_ENABLED=0")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("reading its dynamic section: %w", err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("dynamically linked: it needs %s (DT_NEEDED); build it with CGO_ENABLED=0", strings.Join(libs, ", "))
	}
	return nil
}

func platformImage(bin, certs []byte, created time.Time, osName, arch string, labels map[string]string) (v1.Image, error) {
	files, err := rootfs(bin, certs, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: created}, CreatedBy: "hack/image: tailor binary, CA certificates, passwd", Comment: "tailor " + labels["org.opencontainers.image.version"],
	}})
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = osName, arch
	cfg.Created = v1.Time{Time: created}
	cfg.Config.User = User
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.Cmd = nil
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.Labels = labels
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return mutate.Annotations(img, map[string]string{"org.opencontainers.image.revision": labels["org.opencontainers.image.revision"]}).(v1.Image), nil
}

// rootfs is the layer's tar: the binary, CA certificates, the nonroot user, /tmp.
func rootfs(bin, certs []byte, mtime time.Time) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		data []byte
		dir  bool
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true},
		{name: "tailor", mode: 0o755, data: bin},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if e.name == "home/nonroot/" {
			h.Uid, h.Gid = UID, UID
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes idx as an OCI image layout in dir (replacing what was there),
// its index entry named ref.
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the layout %s: %w", dir, err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return fmt.Errorf("writing the image into %s: %w", dir, err)
	}
	return nil
}

// TarDir writes the files under dir into one tar file at path, in name order, as
// an oci-archive.
func TarDir(dir, path string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range names {
		if err := addFile(tw, dir, p); err != nil {
			f.Close()
			return fmt.Errorf("writing %s into %s: %w", p, path, err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, dir, p string) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	h, err := tar.FileInfoHeader(info, "")
	if err != nil {
		return err
	}
	h.Name = filepath.ToSlash(rel)
	if info.IsDir() {
		h.Name += "/"
	}
	h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
