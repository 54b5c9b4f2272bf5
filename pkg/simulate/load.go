// Package simulate is the offline what-if behind `tailor simulate`: it reads
// manifests (workloads, NodePools, existing nodes and their pods, volumes), runs the
// scheduling engine the controller runs, and renders the plan.
package simulate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
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
	PodDisruptionBudgets   []*policyv1.PodDisruptionBudget
	Namespaces             []*corev1.Namespace
	// Skipped lists objects of kinds simulate does not use, as "Kind name (file)".
	Skipped []string
}

// Load reads files and directories (recursively: *.yaml, *.yml, *.json, and the
// same gzipped). Each document is decoded by its apiVersion and kind; workloads are
// expanded into their pods; NodePools are defaulted and validated as the API server
// would. Errors name the file, the document and the object.
func Load(ctx context.Context, paths []string) (*Workload, error) {
	l := &loader{w: &Workload{Bound: map[string][]*corev1.Pod{}}}
	var err error
	if l.nodePools, err = crd.NewValidator("NodePool"); err != nil {
		return nil, err
	}
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
}

var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, storagev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s)
}()

func (l *loader) file(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
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

func (l *loader) document(ctx context.Context, raw []byte) error {
	var meta struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
		Items           []map[string]any  `json:"items"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if meta.Kind == "" || meta.APIVersion == "" {
		return errors.New("apiVersion and kind are required")
	}
	if strings.HasSuffix(meta.Kind, "List") && meta.Items != nil {
		for i, item := range meta.Items {
			itemRaw, err := yaml.Marshal(item)
			if err != nil {
				return err
			}
			if err := l.document(ctx, itemRaw); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		return nil
	}
	what := fmt.Sprintf("%s %s", meta.Kind, qualified(meta.Metadata.Namespace, meta.Metadata.Name))
	if meta.APIVersion == v1.SchemeGroupVersion.String() {
		switch meta.Kind {
		case "NodePool":
			np, err := l.nodePool(ctx, raw)
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
	obj, _, err := codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			l.w.Skipped = append(l.w.Skipped, what)
			return nil
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	l.object(obj, what)
	return nil
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (l *loader) nodePool(ctx context.Context, raw []byte) (*v1.NodePool, error) {
	// Decode numbers as the API server does (integers stay int64), or CEL rules
	// comparing them would see floats.
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
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

func (l *loader) object(obj runtime.Object, what string) {
	w := l.w
	switch o := obj.(type) {
	case *corev1.Pod:
		defaultNamespace(&o.ObjectMeta)
		if o.Spec.NodeName != "" {
			w.Bound[o.Spec.NodeName] = append(w.Bound[o.Spec.NodeName], o)
		} else {
			w.Pods = append(w.Pods, o)
		}
	case *corev1.Node:
		w.Nodes = append(w.Nodes, o)
	case *appsv1.Deployment:
		defaultNamespace(&o.ObjectMeta)
		w.Pods = append(w.Pods, expand(o.ObjectMeta, &o.Spec.Template, replicas(o.Spec.Replicas))...)
	case *appsv1.ReplicaSet:
		defaultNamespace(&o.ObjectMeta)
		w.Pods = append(w.Pods, expand(o.ObjectMeta, &o.Spec.Template, replicas(o.Spec.Replicas))...)
	case *appsv1.StatefulSet:
		defaultNamespace(&o.ObjectMeta)
		pods := expand(o.ObjectMeta, &o.Spec.Template, replicas(o.Spec.Replicas))
		for _, p := range pods {
			for _, t := range o.Spec.VolumeClaimTemplates {
				claim := fmt.Sprintf("%s-%s", t.Name, p.Name)
				w.PersistentVolumeClaims = append(w.PersistentVolumeClaims, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: p.Namespace}, Spec: *t.Spec.DeepCopy()})
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
			}
		}
		w.Pods = append(w.Pods, pods...)
	case *batchv1.Job:
		defaultNamespace(&o.ObjectMeta)
		n := int32(1)
		if o.Spec.Parallelism != nil {
			n = *o.Spec.Parallelism
		}
		if o.Spec.Completions != nil && *o.Spec.Completions < n {
			n = *o.Spec.Completions
		}
		w.Pods = append(w.Pods, expand(o.ObjectMeta, &o.Spec.Template, n)...)
	case *appsv1.DaemonSet:
		defaultNamespace(&o.ObjectMeta)
		w.DaemonSets = append(w.DaemonSets, o)
	case *corev1.PersistentVolumeClaim:
		defaultNamespace(&o.ObjectMeta)
		w.PersistentVolumeClaims = append(w.PersistentVolumeClaims, o)
	case *corev1.PersistentVolume:
		w.PersistentVolumes = append(w.PersistentVolumes, o)
	case *storagev1.StorageClass:
		w.StorageClasses = append(w.StorageClasses, o)
	case *policyv1.PodDisruptionBudget:
		defaultNamespace(&o.ObjectMeta)
		w.PodDisruptionBudgets = append(w.PodDisruptionBudgets, o)
	case *corev1.Namespace:
		w.Namespaces = append(w.Namespaces, o)
	default:
		w.Skipped = append(w.Skipped, what)
	}
}

func defaultNamespace(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = "default"
	}
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// expand makes n pods from a template, named <owner>-<i>.
func expand(owner metav1.ObjectMeta, t *corev1.PodTemplateSpec, n int32) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		p := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
		p.Name = fmt.Sprintf("%s-%d", owner.Name, i)
		p.Namespace = owner.Namespace
		pods = append(pods, p)
	}
	return pods
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
