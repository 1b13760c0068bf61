// Package helm tests the Helm chart in charts/mcp-gateway: helm lint
// --strict, helm template against golden files, every rendered manifest
// decoded strictly into its Kubernetes API type, the rendered gateway.yaml
// checked by the gateway's own validate command, and the Deployment's
// security and rollout invariants. It is its own module so that Helm and
// the Kubernetes API types stay out of the gateway's go.mod.
//
//	cd tools/helm && GOWORK=off go test ./...          # check
//	cd tools/helm && GOWORK=off go test ./... -update  # rewrite the goldens
package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the rendered chart")

const (
	chartDir    = "../../charts/mcp-gateway"
	releaseName = "gw"
	namespace   = "tools"
	// kubeVersion is the cluster version the chart is rendered for, fixed
	// so that the goldens do not change with Helm's own default.
	kubeVersion = "v1.31.0"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// valuesFiles returns the names (without .values.yaml) of testdata's values
// files.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".values.yaml"))
	}
	for _, want := range []string{"default", "replicas", "full", "auth"} {
		if !slices.Contains(names, want) {
			t.Fatalf("testdata/%s.values.yaml is missing", want)
		}
	}
	return names
}

func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join("testdata", name+".values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fixedKubeVersion(t *testing.T) *chartutil.KubeVersion {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// render is helm template --namespace tools gw charts/mcp-gateway with vals
// as the values: it returns the manifest and NOTES.txt.
func render(t *testing.T, vals map[string]any) (manifest, notes string, err error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{Log: t.Logf})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.KubeVersion = fixedKubeVersion(t)
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		return "", "", err
	}
	return rel.Manifest, rel.Info.Notes, nil
}

func mustRender(t *testing.T, vals map[string]any) (manifest, notes string) {
	t.Helper()
	manifest, notes, err := render(t, vals)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return manifest, notes
}

// lintChart is helm lint --strict with vals; it returns the findings of
// warning severity or worse, and the errors.
func lintChart(t *testing.T, vals map[string]any) []string {
	t.Helper()
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	l.KubeVersion = fixedKubeVersion(t)
	res := l.Run([]string{chartDir}, vals)
	var found []string
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			found = append(found, m.Error())
		}
	}
	for _, err := range res.Errors {
		if s := err.Error(); !slices.Contains(found, s) && !slices.ContainsFunc(found, func(f string) bool { return strings.Contains(f, s) }) {
			found = append(found, s)
		}
	}
	if res.TotalChartsLinted != 1 && len(found) == 0 {
		found = append(found, fmt.Sprintf("%d charts linted, want 1", res.TotalChartsLinted))
	}
	return found
}

func TestLintStrict(t *testing.T) {
	t.Run("chart defaults", func(t *testing.T) {
		if found := lintChart(t, nil); len(found) > 0 {
			t.Errorf("helm lint --strict:\n%s", strings.Join(found, "\n"))
		}
	})
	for _, name := range valuesFiles(t) {
		t.Run(name, func(t *testing.T) {
			if found := lintChart(t, readValues(t, name)); len(found) > 0 {
				t.Errorf("helm lint --strict -f testdata/%s.values.yaml:\n%s", name, strings.Join(found, "\n"))
			}
		})
	}
}

// A misspelt or unknown values key fails lint and template: the schema has
// additionalProperties false at the top and in the chart's own objects, but
// not inside config, the gateway's own schema (validate checks that).
func TestSchemaRejectsUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string // in the error
	}{
		{"top level", map[string]any{"replica": 3}, "replica"},
		{"in service", map[string]any{"service": map[string]any{"prot": 80}}, "prot"},
		{"in secretMounts", map[string]any{"secretMounts": []any{map[string]any{"name": "s", "mountpath": "/x"}}}, "mountpath"},
		{"wrong type", map[string]any{"replicas": "three"}, "replicas"},
		{"bad enum", map[string]any{"service": map[string]any{"type": "ExternalName"}}, "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found := lintChart(t, tc.vals)
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("helm lint --strict found %q, want an error naming %q", found, tc.want)
			}
			if _, _, err := render(t, tc.vals); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template: err = %v, want an error naming %q", err, tc.want)
			}
		})
	}
	t.Run("config is the gateway's", func(t *testing.T) {
		vals := map[string]any{"config": map[string]any{"any_key": true}}
		if _, _, err := render(t, vals); err != nil {
			t.Errorf("helm template with an unknown key inside config: %v (config is checked by validate, not the schema)", err)
		}
	})
}

// The chart's kubeVersion constraint (>=1.27) is enforced.
func TestKubeVersionConstraint(t *testing.T) {
	install := action.NewInstall(&action.Configuration{Log: t.Logf})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = releaseName, namespace
	kv, err := chartutil.ParseKubeVersion("v1.26.9")
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kv
	if _, err := install.Run(loadChart(t), nil); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("rendering for Kubernetes 1.26: err = %v, want the chart's kubeVersion refusing it", err)
	}
}

func TestTemplateGolden(t *testing.T) {
	for _, name := range valuesFiles(t) {
		t.Run(name, func(t *testing.T) {
			vals := readValues(t, name)
			got, _ := mustRender(t, vals)
			if again, _ := mustRender(t, vals); again != got {
				t.Fatalf("two renders differ (-first +second):\n%s", cmp.Diff(got, again))
			}
			golden := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if string(want) != got {
				t.Errorf("%s differs from the rendered chart (-want +got; go test -update rewrites it):\n%s", golden, cmp.Diff(string(want), got))
			}
		})
	}
}

// serviceMonitor holds the fields of a Prometheus Operator ServiceMonitor
// (monitoring.coreos.com/v1) the chart writes; k8s.io/api has no type for
// it. A field the chart writes that is not here fails the strict decode.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// kinds maps each kind the chart may render to its apiVersion and a new
// value of its Go type.
var kinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"Deployment":              {"apps/v1", func() any { return new(appsv1.Deployment) }},
	"Service":                 {"v1", func() any { return new(corev1.Service) }},
	"ConfigMap":               {"v1", func() any { return new(corev1.ConfigMap) }},
	"ServiceAccount":          {"v1", func() any { return new(corev1.ServiceAccount) }},
	"PodDisruptionBudget":     {"policy/v1", func() any { return new(policyv1.PodDisruptionBudget) }},
	"HorizontalPodAutoscaler": {"autoscaling/v2", func() any { return new(autoscalingv2.HorizontalPodAutoscaler) }},
	"NetworkPolicy":           {"networking.k8s.io/v1", func() any { return new(networkingv1.NetworkPolicy) }},
	"ServiceMonitor":          {"monitoring.coreos.com/v1", func() any { return new(serviceMonitor) }},
}

// objects is a rendered chart decoded: each object by kind (the chart
// renders at most one of each).
type objects map[string]any

// decodeManifest splits a manifest into its documents and decodes each
// strictly into its kind's Go type: a duplicate key, a field the type does
// not have (or has in another case), a value of the wrong type, an unknown kind or apiVersion, or two
// objects of one kind is an error.
func decodeManifest(manifest string) (objects, error) {
	objs := objects{}
	for doc := range strings.SplitSeq("\n"+manifest, "\n---\n") {
		if isEmptyDoc(doc) {
			continue
		}
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source(doc), err)
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", source(doc), err)
		}
		k, ok := kinds[tm.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: unknown kind %q", source(doc), tm.Kind)
		}
		if tm.APIVersion != k.apiVersion {
			return nil, fmt.Errorf("%s: %s has apiVersion %q, want %q", source(doc), tm.Kind, tm.APIVersion, k.apiVersion)
		}
		if _, dup := objs[tm.Kind]; dup {
			return nil, fmt.Errorf("%s: a second %s", source(doc), tm.Kind)
		}
		// encoding/json matches field names case-insensitively, so its
		// DisallowUnknownFields would take "readonly" for readOnly;
		// sigs.k8s.io/json (the API server's decoder) is case-sensitive.
		obj := k.new()
		strict, err := sigsjson.UnmarshalStrict(js, obj, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", source(doc), tm.Kind, err)
		}
		if len(strict) > 0 {
			return nil, fmt.Errorf("%s: %s: %w", source(doc), tm.Kind, errors.Join(strict...))
		}
		objs[tm.Kind] = obj
	}
	return objs, nil
}

// isEmptyDoc reports whether a YAML document has only comments and blank
// lines.
func isEmptyDoc(doc string) bool {
	for line := range strings.SplitSeq(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// source returns the template a document came from (Helm's "# Source:"
// line).
func source(doc string) string {
	for line := range strings.SplitSeq(doc, "\n") {
		if s, ok := strings.CutPrefix(line, "# Source: "); ok {
			return s
		}
	}
	return "a document"
}

func mustDecode(t *testing.T, manifest string) objects {
	t.Helper()
	objs, err := decodeManifest(manifest)
	if err != nil {
		t.Fatalf("decoding the rendered manifest: %v", err)
	}
	return objs
}

func TestManifestsDecodeStrictly(t *testing.T) {
	base := []string{"ConfigMap", "Deployment", "Service", "ServiceAccount"}
	want := map[string][]string{
		"default":  base,
		"auth":     base,
		"replicas": append(slices.Clone(base), "HorizontalPodAutoscaler", "PodDisruptionBudget"),
		"full":     append(slices.Clone(base), "NetworkPolicy", "PodDisruptionBudget", "ServiceMonitor"),
	}
	for _, name := range valuesFiles(t) {
		t.Run(name, func(t *testing.T) {
			manifest, _ := mustRender(t, readValues(t, name))
			objs := mustDecode(t, manifest)
			if w, ok := want[name]; ok {
				got := slices.Sorted(func(yield func(string) bool) {
					for k := range objs {
						if !yield(k) {
							return
						}
					}
				})
				slices.Sort(w)
				if diff := cmp.Diff(w, got); diff != "" {
					t.Errorf("kinds rendered (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// The strict decode itself: a misspelt field, an unknown kind and a
// duplicate key are errors.
func TestDecodeManifestRefuses(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"misspelt field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {prots: []}\n", `unknown field "spec.prots"`},
		{"field in another case", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {Type: ClusterIP}\n", `unknown field "spec.Type"`},
		{"unknown kind", "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n", `unknown kind "Secret"`},
		{"wrong apiVersion", "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: x}\n", "want \"autoscaling/v2\""},
		{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b, a: c}\n", "already set"},
		{"servicemonitor field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec: {endpoints: [{port: http, honorLabels: true}]}\n", `unknown field "spec.endpoints[0].honorLabels"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeManifest("---\n# Source: test\n" + tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

var (
	buildOnce  sync.Once
	gatewayBin string
	buildErr   error
)

// gatewayBinary builds ../../cmd/mcp-gateway once per test run.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcp-gateway-helm-test")
		if err != nil {
			buildErr = err
			return
		}
		gatewayBin = filepath.Join(dir, "mcp-gateway")
		cmd := exec.Command("go", "build", "-o", gatewayBin, "./cmd/mcp-gateway")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/mcp-gateway: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return gatewayBin
}

func TestGatewayValidatesRenderedConfig(t *testing.T) {
	bin := gatewayBinary(t)
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	for _, name := range valuesFiles(t) {
		t.Run(name, func(t *testing.T) {
			manifest, _ := mustRender(t, readValues(t, name))
			objs := mustDecode(t, manifest)
			cm := objs["ConfigMap"].(*corev1.ConfigMap)
			dep := objs["Deployment"].(*appsv1.Deployment)
			path := filepath.Join(t.TempDir(), "gateway.yaml")
			if err := os.WriteFile(path, []byte(cm.Data["gateway.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "validate", "--config", path)
			cmd.Env = containerEnv(t, dep)
			out, err := cmd.CombinedOutput()
			t.Logf("mcp-gateway validate:\n%s", out)
			if err != nil {
				t.Errorf("mcp-gateway validate refuses the rendered gateway.yaml: %v", err)
			}
		})
	}
}

// containerEnv is the environment the gateway container would have: the
// Deployment's plain values, and a stand-in value for each variable from a
// Secret.
func containerEnv(t *testing.T, dep *appsv1.Deployment) []string {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			sum := sha256.Sum256([]byte(e.Name))
			env = append(env, e.Name+"="+hex.EncodeToString(sum[:]))
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}
