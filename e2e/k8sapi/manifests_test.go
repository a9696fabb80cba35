package k8sapi

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const dir = "../../deploy/kubernetes"

// object is one decoded manifest document.
type object struct {
	file string
	kind string
	name string
	obj  any
}

// load decodes every document of every manifest strictly (an unknown or
// misspelt field, or a value of the wrong type, is an error) into the
// official type of its kind.
func load(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s doc %d: %v", f, i+1, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "v1 PersistentVolumeClaim":
				obj = &corev1.PersistentVolumeClaim{}
			case "v1 Service":
				obj = &corev1.Service{}
			case "apps/v1 Deployment":
				obj = &appsv1.Deployment{}
			case "batch/v1 Job":
				obj = &batchv1.Job{}
			default:
				t.Fatalf("%s doc %d: kind %q of %q is not one this test knows", f, i+1, tm.Kind, tm.APIVersion)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s doc %d (%s): %v", f, i+1, tm.Kind, err)
			}
			var om struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			yaml.Unmarshal([]byte(doc), &om)
			if om.Metadata.Name == "" {
				t.Errorf("%s doc %d (%s) has no metadata.name", f, i+1, tm.Kind)
			}
			objs = append(objs, object{file: filepath.Base(f), kind: tm.Kind, name: om.Metadata.Name, obj: obj})
		}
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestManifestsAreValidObjects: every manifest is a valid object of its
// kind, and the parts fit together: selectors select their templates,
// Services select pods and name ports that exist, every ConfigMap key and
// claim a pod uses is defined, the fleet is an Indexed Job whose
// completions, parallelism and --shard n agree, and every pod runs the
// retrylab image as a non-root user.
func TestManifestsAreValidObjects(t *testing.T) {
	objs := load(t)
	configMaps := map[string]*corev1.ConfigMap{}
	claims := map[string]bool{}
	type podOwner struct {
		name   string
		labels map[string]string
		spec   *corev1.PodSpec
	}
	var pods []podOwner
	var services []*corev1.Service
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.kind]++
		switch v := o.obj.(type) {
		case *corev1.ConfigMap:
			configMaps[v.Name] = v
		case *corev1.PersistentVolumeClaim:
			claims[v.Name] = true
			if q, ok := v.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Cmp(resource.MustParse("1Gi")) < 0 {
				t.Errorf("%s: claim %s requests %v of storage; want at least 1Gi", o.file, v.Name, q.String())
			}
		case *corev1.Service:
			services = append(services, v)
		case *appsv1.Deployment:
			sel, err := metav1.LabelSelectorAsSelector(v.Spec.Selector)
			if err != nil || sel.Empty() {
				t.Errorf("%s: deployment %s has no usable selector (%v)", o.file, v.Name, err)
			} else if !matches(v.Spec.Selector.MatchLabels, v.Spec.Template.Labels) {
				t.Errorf("%s: deployment %s's selector %v does not select its template's labels %v", o.file, v.Name, v.Spec.Selector.MatchLabels, v.Spec.Template.Labels)
			}
			pods = append(pods, podOwner{v.Name, v.Spec.Template.Labels, &v.Spec.Template.Spec})
		case *batchv1.Job:
			spec := &v.Spec.Template.Spec
			if spec.RestartPolicy != corev1.RestartPolicyNever && spec.RestartPolicy != corev1.RestartPolicyOnFailure {
				t.Errorf("%s: job %s restartPolicy %q; a Job's pods must be Never or OnFailure", o.file, v.Name, spec.RestartPolicy)
			}
			pods = append(pods, podOwner{v.Name, v.Spec.Template.Labels, spec})
			if v.Name == "retrylab-fleet" {
				checkFleet(t, o.file, v)
			}
		}
	}
	for _, k := range []string{"ConfigMap", "PersistentVolumeClaim", "Service", "Deployment", "Job"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
	for _, svc := range services {
		n := 0
		for _, p := range pods {
			if !matches(svc.Spec.Selector, p.labels) {
				continue
			}
			n++
			for _, port := range svc.Spec.Ports {
				if port.TargetPort.Type == 1 && !hasPort(p.spec, port.TargetPort.StrVal) {
					t.Errorf("service %s targets port %q, which %s's containers do not name", svc.Name, port.TargetPort.StrVal, p.name)
				}
			}
		}
		if n == 0 {
			t.Errorf("service %s selects no pod template (%v)", svc.Name, svc.Spec.Selector)
		}
	}
	for _, p := range pods {
		for _, v := range p.spec.Volumes {
			if v.PersistentVolumeClaim != nil && !claims[v.PersistentVolumeClaim.ClaimName] {
				t.Errorf("%s mounts claim %q, which no manifest defines", p.name, v.PersistentVolumeClaim.ClaimName)
			}
		}
		for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
			for _, e := range c.Env {
				if r := e.ValueFrom; r != nil && r.ConfigMapKeyRef != nil {
					cm := configMaps[r.ConfigMapKeyRef.Name]
					if cm == nil || cm.Data[r.ConfigMapKeyRef.Key] == "" {
						t.Errorf("%s/%s reads %s from configmap %s key %s, which is not defined", p.name, c.Name, e.Name, r.ConfigMapKeyRef.Name, r.ConfigMapKeyRef.Key)
					}
				}
			}
			for _, a := range c.Args {
				for _, m := range regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindAllStringSubmatch(a, -1) {
					if !hasEnv(&c, m[1]) {
						t.Errorf("%s/%s: argument %q uses $(%s), which the container's env does not define (Kubernetes would pass it literally)", p.name, c.Name, a, m[1])
					}
				}
			}
			if strings.HasPrefix(c.Image, "retrylab:") {
				sc := p.spec.SecurityContext
				if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
					t.Errorf("%s/%s runs retrylab without runAsNonRoot", p.name, c.Name)
				}
			}
		}
	}
}

// checkFleet: the fleet is an Indexed Job of n pods, each running shard
// $(JOB_COMPLETION_INDEX)/n, the index read from the pod's annotation.
func checkFleet(t *testing.T, file string, j *batchv1.Job) {
	t.Helper()
	if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("%s: the fleet Job is not Indexed", file)
	}
	if j.Spec.Completions == nil || j.Spec.Parallelism == nil || *j.Spec.Completions != *j.Spec.Parallelism {
		t.Fatalf("%s: the fleet Job's completions and parallelism must be set and equal", file)
	}
	n := int(*j.Spec.Completions)
	c := j.Spec.Template.Spec.Containers[0]
	want := fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n)
	found := false
	for _, a := range c.Args {
		found = found || a == want
	}
	if !found {
		t.Errorf("%s: the fleet's args %q lack %q (n = completions = %d)", file, c.Args, want, n)
	}
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" {
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
				t.Errorf("%s: JOB_COMPLETION_INDEX is not read from the completion-index annotation", file)
			}
		}
	}
}

func matches(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func hasPort(spec *corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func hasEnv(c *corev1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// TestStrictDecodingCatchesMistakes proves the decoding above can fail:
// a misspelt field and a wrong type are errors.
func TestStrictDecodingCatchesMistakes(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec: {completion: 3}\n",
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec: {completions: three}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: 1, template: {spec: {containers: [{name: a, image: b, argz: [c]}]}}}\n",
	} {
		var obj any = &batchv1.Job{}
		if bytes.Contains([]byte(doc), []byte("Deployment")) {
			obj = &appsv1.Deployment{}
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err == nil {
			t.Errorf("UnmarshalStrict(%q) = nil; want an error", doc)
		}
	}
}
