// Package simulate is the offline what-if behind `tailor simulate`: it reads
// manifests (workloads, NodePools, existing nodes and their pods, volumes), runs the
// scheduling engine the controller runs, and renders the plan.
package simulate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/config/crd"
)

// Workload is everything read from the manifests.
type Workload struct {
	Pods                   []*corev1.Pod // pending
	Nodes                  []*corev1.Node
	Bound                  map[string][]*corev1.Pod // by node name
	NodePools              []*v1.NodePool
	DaemonSets             []*appsv1.DaemonSet
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	CSINodes               []*storagev1.CSINode // the nodes' CSI attach limits
	PodDisruptionBudgets   []*policyv1.PodDisruptionBudget
	Namespaces             []*corev1.Namespace
	// Skipped lists objects of kinds simulate does not use, as "Kind name (file)".
	Skipped []string
}

// Limits bound what Load reads, so that hostile or mistaken input ends in an error
// that says which bound it met, not in exhausted memory.
type Limits struct {
	// MaxBytes bounds the bytes read from all the files together, counted after
	// decompression. Zero means DefaultMaxBytes.
	MaxBytes int64
	// MaxPods bounds the pods the input makes, bare or expanded from workloads, and
	// the StatefulSet volume claims made with them. Zero means DefaultMaxPods.
	MaxPods int
}

const (
	// DefaultMaxBytes is 64 MiB: hundreds of thousands of objects of plain YAML.
	DefaultMaxBytes = 64 << 20
	// DefaultMaxPods is 100,000 pods, twice the largest batch the benchmarks plan.
	DefaultMaxPods = 100_000
)

// Load reads files and directories (recursively: *.yaml, *.yml, *.json, and the
// same gzipped). Only regular files are read, after following symbolic links: a
// FIFO would hang the read and a device (/dev/zero) never ends. Each document is
// decoded by its apiVersion and kind; workloads are expanded into their pods, after
// the checks the API server makes on replicas and resources; NodePools are
// defaulted and validated as the API server would. Errors name the file, the
// document and the object.
func Load(ctx context.Context, paths []string, limits Limits) (*Workload, error) {
	nodePools, err := crd.NewValidator("NodePool")
	if err != nil {
		return nil, err
	}
	return load(ctx, paths, limits, nodePools)
}

func load(ctx context.Context, paths []string, limits Limits, nodePools *crd.Validator) (*Workload, error) {
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = DefaultMaxBytes
	}
	if limits.MaxPods <= 0 {
		limits.MaxPods = DefaultMaxPods
	}
	l := &loader{w: &Workload{Bound: map[string][]*corev1.Pod{}}, limits: limits, bytesLeft: limits.MaxBytes, nodePools: nodePools}
	for _, p := range paths {
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := l.file(ctx, f); err != nil {
				return nil, err
			}
		}
	}
	return l.finish()
}

func manifestFiles(path string) ([]string, error) {
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
		name := strings.TrimSuffix(d.Name(), ".gz")
		if !d.IsDir() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".json")) {
			files = append(files, p)
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

type loader struct {
	w         *Workload
	nodePools *crd.Validator
	limits    Limits
	bytesLeft int64 // of limits.MaxBytes
	pods      int   // pods and claims made so far, against limits.MaxPods
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, storagev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

var codecs = serializer.NewCodecFactory(scheme)

// openRegular opens path when it is, or links to, a regular file. It checks before
// opening, since opening a FIFO blocks until a writer comes, and again on the open
// file, in case the path changed in between.
func openRegular(path string) (*os.File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(path, info)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if info, err = f.Stat(); err != nil || !info.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = notRegular(path, info)
		}
		return nil, err
	}
	return f, nil
}

func notRegular(path string, info fs.FileInfo) error {
	what := "not a regular file"
	switch m := info.Mode(); {
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0, m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m.IsDir():
		what = "a directory"
	}
	return fmt.Errorf("%s: %s; only regular files are read", path, what)
}

// read returns the file's content, decompressed when gzipped, charging it to the
// input budget.
func (l *loader) read(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	}
	// One byte past the budget tells a file that fills it from one that exceeds it.
	data, err := io.ReadAll(io.LimitReader(r, l.bytesLeft+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > l.bytesLeft {
		return nil, fmt.Errorf("%s: the input exceeds %s (counted after decompression, over all files); raise --max-input-size to read more",
			path, byteSize(l.limits.MaxBytes))
	}
	l.bytesLeft -= int64(len(data))
	return data, nil
}

// byteSize renders n as a quantity when it is a whole number of KiB, else in bytes.
func byteSize(n int64) string {
	if n%1024 == 0 {
		return resource.NewQuantity(n, resource.BinarySI).String()
	}
	return fmt.Sprintf("%d bytes", n)
}

func (l *loader) file(ctx context.Context, path string) error {
	data, err := l.read(path)
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isComment(raw) {
			continue
		}
		if err := l.document(ctx, raw); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
	}
}

func isComment(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// header is what identifies an object.
type header struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items presence `json:"items"`
}

// presence notes that a field is there, without copying what it holds.
type presence bool

func (p *presence) UnmarshalJSON(data []byte) error {
	*p = presence(!bytes.Equal(bytes.TrimSpace(data), []byte("null")))
	return nil
}

func (h *header) isList() bool { return strings.HasSuffix(h.Kind, "List") && bool(h.Items) }

func (h *header) what() string {
	return fmt.Sprintf("%s %s", h.Kind, qualified(h.Metadata.Namespace, h.Metadata.Name))
}

func (l *loader) document(ctx context.Context, raw []byte) error {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if !h.isList() {
		return l.leaf(ctx, js, &h)
	}
	// A List is decoded once, whole, and its items walked in place: decoding each
	// nested List again would make deep nesting cost quadratic time.
	var list map[string]any
	if err := utiljson.Unmarshal(js, &list); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	return l.items(ctx, list)
}

// items reads the items of a decoded List, and of Lists within it.
func (l *loader) items(ctx context.Context, list map[string]any) error {
	items, ok := list["items"].([]any)
	if !ok {
		return errors.New("items: not a list")
	}
	for i, item := range items {
		obj, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("item %d: not an object", i)
		}
		h := headerOf(obj)
		var err error
		if h.isList() {
			err = l.items(ctx, obj)
		} else {
			var js []byte
			if js, err = json.Marshal(obj); err == nil {
				err = l.leaf(ctx, js, &h)
			}
		}
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
	}
	return nil
}

func headerOf(obj map[string]any) header {
	var h header
	h.APIVersion, _ = obj["apiVersion"].(string)
	h.Kind, _ = obj["kind"].(string)
	if m, ok := obj["metadata"].(map[string]any); ok {
		h.Metadata.Name, _ = m["name"].(string)
		h.Metadata.Namespace, _ = m["namespace"].(string)
	}
	h.Items = presence(obj["items"] != nil)
	return h
}

// leaf reads one object (not a List) from its JSON.
func (l *loader) leaf(ctx context.Context, js []byte, h *header) error {
	if h.Kind == "" || h.APIVersion == "" {
		return errors.New("apiVersion and kind are required")
	}
	what := h.what()
	if h.APIVersion == v1.SchemeGroupVersion.String() {
		switch h.Kind {
		case "NodePool":
			np, err := l.nodePool(ctx, js)
			if err != nil {
				return err // already names the NodePool, as the API server does
			}
			l.w.NodePools = append(l.w.NodePools, np)
			return nil
		default:
			l.w.Skipped = append(l.w.Skipped, what)
			return nil
		}
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(js, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			l.w.Skipped = append(l.w.Skipped, what)
			return nil
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := l.object(obj, what); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (l *loader) nodePool(ctx context.Context, js []byte) (*v1.NodePool, error) {
	// Decode numbers as the API server does (integers stay int64), or CEL rules
	// comparing them would see floats.
	obj := map[string]any{}
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		return nil, err
	}
	if err := l.nodePools.Admit(ctx, obj); err != nil {
		return nil, err
	}
	np := &v1.NodePool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, np); err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", np.Name, err)
	}
	if np.Name == "" {
		return nil, errors.New("NodePool: metadata.name is required")
	}
	return np, nil
}

// object files a decoded object. Workloads are checked as the API server checks
// them (it would refuse negative replicas or requests) before they are expanded.
func (l *loader) object(obj runtime.Object, what string) error {
	w := l.w
	switch o := obj.(type) {
	case *corev1.Pod:
		defaultNamespace(&o.ObjectMeta)
		if err := validatePodSpec(&o.Spec, field.NewPath("spec")); err != nil {
			return err
		}
		if err := l.charge(1, "the pod"); err != nil {
			return err
		}
		if o.Spec.NodeName != "" {
			w.Bound[o.Spec.NodeName] = append(w.Bound[o.Spec.NodeName], o)
		} else {
			w.Pods = append(w.Pods, o)
		}
	case *corev1.Node:
		w.Nodes = append(w.Nodes, o)
	case *appsv1.Deployment:
		defaultNamespace(&o.ObjectMeta)
		pods, err := l.expand(o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas, field.NewPath("spec", "replicas"), 0)
		if err != nil {
			return err
		}
		w.Pods = append(w.Pods, pods...)
	case *appsv1.ReplicaSet:
		defaultNamespace(&o.ObjectMeta)
		pods, err := l.expand(o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas, field.NewPath("spec", "replicas"), 0)
		if err != nil {
			return err
		}
		w.Pods = append(w.Pods, pods...)
	case *appsv1.StatefulSet:
		defaultNamespace(&o.ObjectMeta)
		claims := len(o.Spec.VolumeClaimTemplates)
		pods, err := l.expand(o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas, field.NewPath("spec", "replicas"), claims)
		if err != nil {
			return err
		}
		for _, p := range pods {
			// The pods share their template's slices: each gets volumes of its own.
			p.Spec.Volumes = slices.Clip(p.Spec.Volumes)
			for _, t := range o.Spec.VolumeClaimTemplates {
				claim := fmt.Sprintf("%s-%s", t.Name, p.Name)
				w.PersistentVolumeClaims = append(w.PersistentVolumeClaims, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: p.Namespace}, Spec: t.Spec})
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
			}
		}
		w.Pods = append(w.Pods, pods...)
	case *batchv1.Job:
		defaultNamespace(&o.ObjectMeta)
		spec := field.NewPath("spec")
		for _, f := range []struct {
			v    *int32
			path *field.Path
		}{{o.Spec.Parallelism, spec.Child("parallelism")}, {o.Spec.Completions, spec.Child("completions")}} {
			if f.v != nil && *f.v < 0 {
				return field.Invalid(f.path, *f.v, "must be greater than or equal to 0")
			}
		}
		n := int32(1)
		if o.Spec.Parallelism != nil {
			n = *o.Spec.Parallelism
		}
		path := spec.Child("parallelism")
		if o.Spec.Completions != nil && *o.Spec.Completions < n {
			n, path = *o.Spec.Completions, spec.Child("completions")
		}
		pods, err := l.expand(o.ObjectMeta, &o.Spec.Template, &n, path, 0)
		if err != nil {
			return err
		}
		w.Pods = append(w.Pods, pods...)
	case *appsv1.DaemonSet:
		defaultNamespace(&o.ObjectMeta)
		if err := validatePodSpec(&o.Spec.Template.Spec, field.NewPath("spec", "template", "spec")); err != nil {
			return err
		}
		w.DaemonSets = append(w.DaemonSets, o)
	case *corev1.PersistentVolumeClaim:
		defaultNamespace(&o.ObjectMeta)
		w.PersistentVolumeClaims = append(w.PersistentVolumeClaims, o)
	case *corev1.PersistentVolume:
		w.PersistentVolumes = append(w.PersistentVolumes, o)
	case *storagev1.StorageClass:
		w.StorageClasses = append(w.StorageClasses, o)
	case *storagev1.CSINode:
		w.CSINodes = append(w.CSINodes, o)
	case *policyv1.PodDisruptionBudget:
		defaultNamespace(&o.ObjectMeta)
		w.PodDisruptionBudgets = append(w.PodDisruptionBudgets, o)
	case *corev1.Namespace:
		w.Namespaces = append(w.Namespaces, o)
	default:
		w.Skipped = append(w.Skipped, what)
	}
	return nil
}

func defaultNamespace(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = "default"
	}
}

// charge counts n more pods (or claims) against the bound, before they are made.
func (l *loader) charge(n int64, what string) error {
	if left := int64(l.limits.MaxPods - l.pods); n > left {
		return fmt.Errorf("%s would make the input hold more than %d pods and volume claims (%d so far); raise --max-pods to plan more",
			what, l.limits.MaxPods, l.pods)
	}
	l.pods += int(n)
	return nil
}

// expand makes the pods of a workload from its template, named <owner>-<i>:
// replicas of them (one when unset), each with claims volume claims. The count and
// the template are checked first. The pods share the template's maps and slices
// (nothing downstream changes them), so a large template is not copied per pod.
func (l *loader) expand(owner metav1.ObjectMeta, t *corev1.PodTemplateSpec, replicas *int32, path *field.Path, claims int) ([]*corev1.Pod, error) {
	n := int32(1)
	if replicas != nil {
		n = *replicas
	}
	if n < 0 {
		return nil, field.Invalid(path, n, "must be greater than or equal to 0")
	}
	if err := validatePodSpec(&t.Spec, field.NewPath("spec", "template", "spec")); err != nil {
		return nil, err
	}
	if err := l.charge(int64(n)*int64(1+claims), fmt.Sprintf("%s %d", path, n)); err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		p := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
		p.Name = fmt.Sprintf("%s-%d", owner.Name, i)
		p.Namespace = owner.Namespace
		pods = append(pods, p)
	}
	return pods, nil
}

// validatePodSpec refuses negative requests, limits and overhead, as the API
// server does; a plan would otherwise count them as room gained.
func validatePodSpec(spec *corev1.PodSpec, path *field.Path) error {
	var errs field.ErrorList
	check := func(list corev1.ResourceList, p *field.Path) {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			if q := list[name]; q.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	containers := func(cs []corev1.Container, p *field.Path) {
		for i := range cs {
			r := &cs[i].Resources
			check(r.Requests, p.Index(i).Child("resources", "requests"))
			check(r.Limits, p.Index(i).Child("resources", "limits"))
		}
	}
	containers(spec.InitContainers, path.Child("initContainers"))
	containers(spec.Containers, path.Child("containers"))
	check(spec.Overhead, path.Child("overhead"))
	if spec.Resources != nil {
		check(spec.Resources.Requests, path.Child("resources", "requests"))
		check(spec.Resources.Limits, path.Child("resources", "limits"))
	}
	return errs.ToAggregate()
}

func (l *loader) finish() (*Workload, error) {
	w := l.w
	known := map[string]bool{}
	for _, n := range w.Nodes {
		known[n.Name] = true
	}
	var unknown []string
	for name := range w.Bound {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	if len(unknown) > 0 {
		return nil, fmt.Errorf("pods are bound to nodes not in the input: %s", strings.Join(unknown, ", "))
	}
	seen := map[string]bool{}
	for _, np := range w.NodePools {
		if seen[np.Name] {
			return nil, fmt.Errorf("NodePool %s is defined twice", np.Name)
		}
		seen[np.Name] = true
	}
	return w, nil
}
