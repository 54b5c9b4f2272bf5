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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/pkg/state"
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
	// CapacityBuffers keep room (see state.Buffer); the PodTemplates and
	// workloads read are what they may name.
	CapacityBuffers []*cb.CapacityBuffer
	PodTemplates    []*corev1.PodTemplate
	Deployments     []*appsv1.Deployment
	ReplicaSets     []*appsv1.ReplicaSet
	StatefulSets    []*appsv1.StatefulSet
	// Skipped lists objects of kinds simulate does not use, as "Kind name".
	Skipped []string
	// Refused are the objects the API server would refuse (an invalid NodePool, an
	// unknown field, a negative replica count), left out of the plan.
	Refused []Refusal
	// Warnings name the unknown fields dropped under FieldValidationWarn.
	Warnings []string
	// Notes name the workloads that make no pods (replicas: 0), which would
	// otherwise leave their absence from the plan unexplained.
	Notes []string
	// Owners names the workload each pending pod was made from, by the pod's
	// "namespace/name": "inflate", or "team/web" outside the default namespace.
	Owners map[string]string
	// EC2NodeClasses and SimNodeClasses, by name, price what the NodePools' nodes
	// cost besides their instances (see NodeCosts).
	EC2NodeClasses map[string]*awsv1.EC2NodeClass
	SimNodeClasses map[string]*v1alpha1.SimNodeClass
}

// Refusal is an object left out of the plan because the API server would refuse
// it, as `kubectl apply` reports it and goes on with the rest.
type Refusal struct {
	File string
	// Document is the object's YAML document in File, from 1; Item its place in a
	// List there ("item 0: item 2"), if it is in one.
	Document int
	Item     string
	// Object is its kind and name: "NodePool default", "Deployment team/web".
	Object string
	// Err says why, naming the object and the field, in the API server's words
	// where it has them.
	Err error
	// UnknownFields is set when unknown fields alone refused it: under
	// FieldValidationWarn they would be dropped and the object read.
	UnknownFields bool
}

func (r Refusal) Error() string {
	where := fmt.Sprintf("%s: document %d", r.File, r.Document)
	if r.Item != "" {
		where += ": " + r.Item
	}
	return where + ": " + r.Err.Error()
}

// FieldValidation is what Load does with fields an object's schema does not
// declare, as `kubectl apply --validate` says.
type FieldValidation string

const (
	// FieldValidationStrict refuses the object, naming the fields: kubectl's
	// default, and the default here.
	FieldValidationStrict FieldValidation = "strict"
	// FieldValidationWarn drops the fields, with a warning each.
	FieldValidationWarn FieldValidation = "warn"
	// FieldValidationIgnore drops them silently, as the API server does when not
	// asked to validate.
	FieldValidationIgnore FieldValidation = "ignore"
)

// Options say how Load reads the manifests.
type Options struct {
	Limits Limits
	// FieldValidation is strict when empty.
	FieldValidation FieldValidation
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
// decoded by its apiVersion and kind, strictly as opts say; workloads are expanded
// into their pods, after the checks the API server makes on replicas and
// resources; NodePools are defaulted and validated as the API server would. An
// object the API server would refuse is left out and listed in Refused, naming the
// file, the document, the object and the field, as `kubectl apply` goes on with
// the rest; input that cannot be read at all, or that meets a bound, is an error.
func Load(ctx context.Context, paths []string, opts Options) (*Workload, error) {
	nodePools, err := crd.NewValidator("NodePool")
	if err != nil {
		return nil, err
	}
	return load(ctx, paths, opts, nodePools)
}

func load(ctx context.Context, paths []string, opts Options, nodePools *crd.Validator) (*Workload, error) {
	limits := opts.Limits
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = DefaultMaxBytes
	}
	if limits.MaxPods <= 0 {
		limits.MaxPods = DefaultMaxPods
	}
	if opts.FieldValidation == "" {
		opts.FieldValidation = FieldValidationStrict
	}
	l := &loader{w: &Workload{Bound: map[string][]*corev1.Pod{}, Owners: map[string]string{}}, limits: limits,
		validation: opts.FieldValidation, bytesLeft: limits.MaxBytes, nodePools: nodePools, poolsSeen: map[string]string{}}
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
	w          *Workload
	nodePools  *crd.Validator
	limits     Limits
	validation FieldValidation
	bytesLeft  int64 // of limits.MaxBytes
	pods       int   // pods and claims made so far, against limits.MaxPods
	// path and doc are the file and document being read, for messages.
	path string
	doc  int
	// poolsSeen says where each NodePool read so far was defined.
	poolsSeen map[string]string
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, storagev1.AddToScheme, policyv1.AddToScheme, cb.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// codecs decode strictly: an unknown or repeated field is an error that still
// comes with the object decoded, so FieldValidation can decide.
var codecs = serializer.NewCodecFactory(scheme, serializer.EnableStrict)

// usedKinds are the built-in kinds simulate reads; other objects are listed in
// Skipped without being decoded or validated.
var usedKinds = map[schema.GroupVersionKind]bool{
	corev1.SchemeGroupVersion.WithKind("Pod"):                   true,
	corev1.SchemeGroupVersion.WithKind("Node"):                  true,
	corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"): true,
	corev1.SchemeGroupVersion.WithKind("PersistentVolume"):      true,
	corev1.SchemeGroupVersion.WithKind("Namespace"):             true,
	corev1.SchemeGroupVersion.WithKind("PodTemplate"):           true,
	cb.SchemeGroupVersion.WithKind("CapacityBuffer"):            true,
	appsv1.SchemeGroupVersion.WithKind("Deployment"):            true,
	appsv1.SchemeGroupVersion.WithKind("ReplicaSet"):            true,
	appsv1.SchemeGroupVersion.WithKind("StatefulSet"):           true,
	appsv1.SchemeGroupVersion.WithKind("DaemonSet"):             true,
	batchv1.SchemeGroupVersion.WithKind("Job"):                  true,
	storagev1.SchemeGroupVersion.WithKind("StorageClass"):       true,
	storagev1.SchemeGroupVersion.WithKind("CSINode"):            true,
	policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"): true,
}

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
	l.path = path
	for doc := 1; ; doc++ {
		l.doc = doc
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
		return l.leaf(ctx, js, &h, "")
	}
	// A List is decoded once, whole, and its items walked in place: decoding each
	// nested List again would make deep nesting cost quadratic time.
	var list map[string]any
	if err := utiljson.Unmarshal(js, &list); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	return l.items(ctx, list, "")
}

// items reads the items of a decoded List, and of Lists within it; where is the
// List's own place in the document ("" at the top).
func (l *loader) items(ctx context.Context, list map[string]any, where string) error {
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
		item := fmt.Sprintf("item %d", i)
		if where != "" {
			item = where + ": " + item
		}
		var err error
		if h.isList() {
			err = l.items(ctx, obj, item)
		} else {
			var js []byte
			if js, err = json.Marshal(obj); err == nil {
				err = l.leaf(ctx, js, &h, item)
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

// leaf reads one object (not a List) from its JSON; item is its place in the
// document's List, if in one. An object the API server would refuse is recorded
// in Refused; the error is for input that stops the whole read.
func (l *loader) leaf(ctx context.Context, js []byte, h *header, item string) error {
	if h.Kind == "" || h.APIVersion == "" {
		return errors.New("apiVersion and kind are required")
	}
	what := h.what()
	gvk := schema.FromAPIVersionAndKind(h.APIVersion, h.Kind)
	if gvk == v1.SchemeGroupVersion.WithKind("NodePool") {
		np, err := l.nodePool(ctx, js, what, item)
		if err != nil {
			l.refuse(item, what, err, false) // the error names the NodePool, as the API server's does
			return nil
		}
		if np == nil {
			return nil // refused for unknown fields
		}
		here := fmt.Sprintf("%s document %d", l.path, l.doc)
		if first, ok := l.poolsSeen[np.Name]; ok {
			l.refuse(item, what, fmt.Errorf("NodePool %s is defined twice; the first, in %s, is used", np.Name, first), false)
			return nil
		}
		l.poolsSeen[np.Name] = here
		l.w.NodePools = append(l.w.NodePools, np)
		return nil
	}
	if gvk.Group == cb.Group && gvk.Kind == "CapacityBuffer" && gvk.Version == "v1alpha1" {
		// The same schema as v1beta1, as the API server serves it.
		gvk.Version = cb.SchemeGroupVersion.Version
		var obj map[string]any
		if err := json.Unmarshal(js, &obj); err != nil {
			l.refuse(item, what, fmt.Errorf("%s: %w", what, err), false)
			return nil
		}
		obj["apiVersion"] = cb.SchemeGroupVersion.String()
		var err error
		if js, err = json.Marshal(obj); err != nil {
			return err
		}
	}
	if nodeClassKinds[gvk] {
		if err := l.nodeClass(js, gvk, what); err != nil {
			l.refuse(item, what, err, false)
		}
		return nil
	}
	if !usedKinds[gvk] {
		l.w.Skipped = append(l.w.Skipped, what)
		return nil
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(js, nil, nil)
	if err != nil {
		strict, ok := runtime.AsStrictDecodingError(err)
		if !ok || obj == nil {
			l.refuse(item, what, fmt.Errorf("%s: %w", what, err), false)
			return nil
		}
		if l.unknownFields(item, what, strict) {
			return nil
		}
	}
	if err := l.object(obj, what); err != nil {
		if errors.As(err, new(*boundError)) {
			return fmt.Errorf("%s: %w", what, err)
		}
		l.refuse(item, what, fmt.Errorf("%s: %w", what, err), false)
	}
	return nil
}

// strictDecodingError is the error a strict decoder returns with the object: each
// of its errors is an unknown or repeated field.
type strictDecodingError interface {
	error
	Errors() []error
}

// refuse leaves an object out of the plan, saying why.
func (l *loader) refuse(item, what string, err error, unknownFields bool) {
	l.w.Refused = append(l.w.Refused, Refusal{File: l.path, Document: l.doc, Item: item, Object: what, Err: err, UnknownFields: unknownFields})
}

// unknownFields deals with fields the object's schema does not declare (and
// repeated ones), as the field validation says, and reports whether it refused the
// object for them.
func (l *loader) unknownFields(item, what string, strict strictDecodingError) bool {
	switch l.validation {
	case FieldValidationIgnore:
		return false
	case FieldValidationWarn:
		where := fmt.Sprintf("%s: document %d", l.path, l.doc)
		if item != "" {
			where += ": " + item
		}
		for _, e := range strict.Errors() {
			l.w.Warnings = append(l.w.Warnings, fmt.Sprintf("%s: %s: %v; dropped", where, what, e))
		}
		return false
	default:
		l.refuse(item, what, fmt.Errorf("%s: %w", what, strict), true)
		return true
	}
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// nodePool decodes, defaults and validates a NodePool as the API server would. It
// returns nil and no error when unknown fields refused it (recorded already).
func (l *loader) nodePool(ctx context.Context, js []byte, what, item string) (*v1.NodePool, error) {
	// Decode numbers as the API server does (integers stay int64), or CEL rules
	// comparing them would see floats.
	obj := map[string]any{}
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if paths := l.nodePools.UnknownFields(obj); len(paths) > 0 {
		errs := make([]error, len(paths))
		for i, p := range paths {
			errs[i] = fmt.Errorf(`unknown field "%s"`, p)
		}
		strict, _ := runtime.AsStrictDecodingError(runtime.NewStrictDecodingError(errs))
		if l.unknownFields(item, what, strict) {
			return nil, nil
		}
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
		pods, err := l.expand(what, o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas, field.NewPath("spec", "replicas"), 0)
		if err != nil {
			return err
		}
		w.Pods = append(w.Pods, pods...)
		// A buffer's percentage is of the replicas it runs: all of them, here.
		o.Status.Replicas = int32(len(pods))
		w.Deployments = append(w.Deployments, o)
	case *appsv1.ReplicaSet:
		defaultNamespace(&o.ObjectMeta)
		pods, err := l.expand(what, o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas, field.NewPath("spec", "replicas"), 0)
		if err != nil {
			return err
		}
		w.Pods = append(w.Pods, pods...)
		o.Status.Replicas = int32(len(pods))
		w.ReplicaSets = append(w.ReplicaSets, o)
	case *appsv1.StatefulSet:
		defaultNamespace(&o.ObjectMeta)
		claims := len(o.Spec.VolumeClaimTemplates)
		pods, err := l.expand(what, o.ObjectMeta, &o.Spec.Template, o.Spec.Replicas, field.NewPath("spec", "replicas"), claims)
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
		o.Status.Replicas = int32(len(pods))
		w.StatefulSets = append(w.StatefulSets, o)
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
		pods, err := l.expand(what, o.ObjectMeta, &o.Spec.Template, &n, path, 0)
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
	case *corev1.PodTemplate:
		defaultNamespace(&o.ObjectMeta)
		w.PodTemplates = append(w.PodTemplates, o)
	case *cb.CapacityBuffer:
		defaultNamespace(&o.ObjectMeta)
		if o.UID == "" {
			o.UID = types.UID(o.Namespace + "/" + o.Name)
		}
		w.CapacityBuffers = append(w.CapacityBuffers, o)
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

// boundError is a bound of Limits met: it stops the whole read, unlike an object
// the API server would refuse.
type boundError struct{ msg string }

func (e *boundError) Error() string { return e.msg }

// charge counts n more pods (or claims) against the bound, before they are made.
func (l *loader) charge(n int64, what string) error {
	if left := int64(l.limits.MaxPods - l.pods); n > left {
		return &boundError{fmt.Sprintf("%s would make the input hold more than %d pods and volume claims (%d so far); raise --max-pods to plan more",
			what, l.limits.MaxPods, l.pods)}
	}
	l.pods += int(n)
	return nil
}

// expand makes the pods of the workload what from its template, named
// <owner>-<i>: replicas of them (one when unset), each with claims volume claims.
// The count and the template are checked first. The pods share the template's maps
// and slices (nothing downstream changes them), so a large template is not copied
// per pod. A workload of no pods gets a note, so an empty plan is explained.
func (l *loader) expand(what string, owner metav1.ObjectMeta, t *corev1.PodTemplateSpec, replicas *int32, path *field.Path, claims int) ([]*corev1.Pod, error) {
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
	if n == 0 {
		l.w.Notes = append(l.w.Notes, fmt.Sprintf("%s: %s: %s is 0, so it has no pods to plan; set it above 0 to plan for them", l.path, what, path))
	}
	name := owner.Name
	if owner.Namespace != metav1.NamespaceDefault {
		name = owner.Namespace + "/" + name
	}
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		p := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
		p.Name = fmt.Sprintf("%s-%d", owner.Name, i)
		p.Namespace = owner.Namespace
		pods = append(pods, p)
		l.w.Owners[p.Namespace+"/"+p.Name] = name
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
	w.Notes = append(w.Notes, w.unpricedNodeClasses()...)
	for _, b := range state.ResolveBuffers(w.Objects()) {
		name := b.Buffer.Name
		if b.Buffer.Namespace != metav1.NamespaceDefault {
			name = b.Buffer.Namespace + "/" + name
		}
		if b.Refused != "" {
			w.Notes = append(w.Notes, fmt.Sprintf("CapacityBuffer %s is refused (%s): %s", name, b.Refused, b.Message))
			continue
		}
		for _, p := range b.Pods {
			w.Owners[p.Namespace+"/"+p.Name] = "buffer " + name
		}
	}
	return w, nil
}
