package helm

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func deployment(t *testing.T, vals map[string]any) *appsv1.Deployment {
	t.Helper()
	manifest, _ := mustRender(t, vals)
	return mustDecode(t, manifest)["Deployment"].(*appsv1.Deployment)
}

// The Deployment's security and rollout invariants, for every values file:
// the goldens would show a change, these say which ones must never happen.
func TestDeploymentInvariants(t *testing.T) {
	for _, name := range valuesFiles(t) {
		t.Run(name, func(t *testing.T) {
			vals := readValues(t, name)
			dep := deployment(t, vals)
			pod := dep.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			c := pod.Containers[0]

			psc, sc := pod.SecurityContext, c.SecurityContext
			if psc == nil || sc == nil {
				t.Fatalf("pod securityContext %v, container securityContext %v: want both", psc, sc)
			}
			for what, p := range map[string]*int64{
				"pod runAsUser": psc.RunAsUser, "pod runAsGroup": psc.RunAsGroup,
				"container runAsUser": sc.RunAsUser, "container runAsGroup": sc.RunAsGroup,
			} {
				if p == nil || *p != 65532 {
					t.Errorf("%s = %v, want 65532", what, ptrString(p))
				}
			}
			for what, p := range map[string]*bool{
				"pod runAsNonRoot": psc.RunAsNonRoot, "container runAsNonRoot": sc.RunAsNonRoot,
				"readOnlyRootFilesystem": sc.ReadOnlyRootFilesystem,
			} {
				if p == nil || !*p {
					t.Errorf("%s = %v, want true", what, ptrString(p))
				}
			}
			if p := sc.AllowPrivilegeEscalation; p == nil || *p {
				t.Errorf("allowPrivilegeEscalation = %v, want false", ptrString(p))
			}
			if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
				t.Errorf("capabilities = %+v, want drop [ALL] and no add", sc.Capabilities)
			}
			if p := psc.SeccompProfile; p == nil || p.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod seccompProfile = %+v, want RuntimeDefault", p)
			}

			checkProbe(t, "liveness", c.LivenessProbe, "/healthz")
			checkProbe(t, "readiness", c.ReadinessProbe, "/readyz")
			if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
				t.Errorf("ports = %+v, want http 8080", c.Ports)
			}
			if !hasEnv(c, "MCP_GATEWAY_LISTEN", "0.0.0.0:8080") {
				t.Errorf("env has no MCP_GATEWAY_LISTEN=0.0.0.0:8080: %+v", c.Env)
			}
			if want := []string{"serve", "--config", "/etc/mcp-gateway/gateway.yaml"}; strings.Join(c.Args, " ") != strings.Join(want, " ") {
				t.Errorf("args = %q, want %q", c.Args, want)
			}
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
				t.Errorf("a preStop hook: the gateway handles SIGTERM itself")
			}

			// Every Secret is mounted read-only, and so is the config.
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = m
			}
			secretVolumes := 0
			for _, v := range pod.Volumes {
				m, mounted := mounts[v.Name]
				switch {
				case v.Secret != nil:
					secretVolumes++
					if !mounted || !m.ReadOnly {
						t.Errorf("Secret %s: mount %+v, want read-only", v.Secret.SecretName, m)
					}
				case v.ConfigMap != nil && v.Name == "config":
					if !mounted || !m.ReadOnly || m.MountPath != "/etc/mcp-gateway" {
						t.Errorf("config mount %+v, want /etc/mcp-gateway read-only", m)
					}
				}
			}
			if want := len(sliceValue(vals, "secretMounts")); secretVolumes != want {
				t.Errorf("%d Secret volumes, want %d (one per secretMounts item)", secretVolumes, want)
			}
			if m, ok := mounts["tmp"]; !ok || m.MountPath != "/tmp" {
				t.Errorf("no /tmp mount (the root filesystem is read-only): %+v", c.VolumeMounts)
			}

			if dep.Spec.Template.Annotations["checksum/config"] == "" {
				t.Errorf("no checksum/config annotation on the pod template")
			}
			autoscaling, _ := vals["autoscaling"].(map[string]any)
			if hpa, _ := autoscaling["enabled"].(bool); hpa && dep.Spec.Replicas != nil {
				t.Errorf("replicas = %d with the HPA enabled: the HPA owns it", *dep.Spec.Replicas)
			}
		})
	}
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s probe %+v, want GET %s", what, p, path)
		return
	}
	if p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
		t.Errorf("%s probe GET %s on port %s, want %s on http", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
	}
}

func hasEnv(c corev1.Container, name, value string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value == value && e.ValueFrom == nil
		}
	}
	return false
}

func sliceValue(vals map[string]any, key string) []any {
	s, _ := vals[key].([]any)
	return s
}

func ptrString[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// A change to config changes the pod template's checksum/config (so the
// pods roll); the same config gives the same checksum.
func TestChecksumFollowsConfig(t *testing.T) {
	withEndpoint := func(endpoint string) map[string]any {
		return map[string]any{"config": map[string]any{"listen": "0.0.0.0:8080", "endpoint": endpoint, "upstreams": []any{}}}
	}
	sum := func(vals map[string]any) string {
		return deployment(t, vals).Spec.Template.Annotations["checksum/config"]
	}
	a, again, b := sum(withEndpoint("/mcp")), sum(withEndpoint("/mcp")), sum(withEndpoint("/other"))
	if a == "" || a != again {
		t.Errorf("the same config gave checksums %q and %q", a, again)
	}
	if a == b {
		t.Errorf("config changed but checksum/config stayed %q", a)
	}
	if c := sum(map[string]any{"allowedHosts": []any{"gw.example.com"}}); c == sum(nil) {
		t.Errorf("allowedHosts changed gateway.yaml but not checksum/config")
	}
}

// NOTES.txt warns when auth is off, and when several pods run without the
// shared state.
func TestNotesWarnings(t *testing.T) {
	const noAuth, noRedis = "WARNING: auth is not configured", "WARNING: more than one replica runs"
	for _, tc := range []struct {
		name        string
		vals        map[string]any
		auth, redis bool // the warnings expected
	}{
		{"default", nil, true, false},
		{"auth", readValues(t, "auth"), false, false},
		{"replicas", readValues(t, "replicas"), false, false},
		{"two replicas, memory state", map[string]any{"replicas": 2}, true, true},
		{"hpa, memory state", map[string]any{"autoscaling": map[string]any{"enabled": true}, "config": map[string]any{"auth": map[string]any{"mode": "api_key"}}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, notes := mustRender(t, tc.vals)
			if got := strings.Contains(notes, noAuth); got != tc.auth {
				t.Errorf("auth warning shown = %v, want %v; notes:\n%s", got, tc.auth, notes)
			}
			if got := strings.Contains(notes, noRedis); got != tc.redis {
				t.Errorf("replicas warning shown = %v, want %v; notes:\n%s", got, tc.redis, notes)
			}
			if !strings.Contains(notes, "gw-mcp-gateway.tools.svc.cluster.local/mcp") {
				t.Errorf("notes do not say the in-cluster URL:\n%s", notes)
			}
		})
	}
}

// The Service, PodDisruptionBudget, NetworkPolicy and ServiceMonitor select
// the Deployment's pods, and the HPA scales that Deployment: a label or
// name that drifts would leave them pointing at nothing, which no decode
// would notice.
func TestSelectorsMatchPods(t *testing.T) {
	for _, name := range valuesFiles(t) {
		t.Run(name, func(t *testing.T) {
			manifest, _ := mustRender(t, readValues(t, name))
			objs := mustDecode(t, manifest)
			dep := objs["Deployment"].(*appsv1.Deployment)
			podLabels := labels.Set(dep.Spec.Template.Labels)
			selects := func(what string, sel *metav1.LabelSelector) {
				t.Helper()
				s, err := metav1.LabelSelectorAsSelector(sel)
				if err != nil || s.Empty() || !s.Matches(podLabels) {
					t.Errorf("%s selector %v (%v) does not select the pods (labels %v)", what, sel, err, podLabels)
				}
			}
			selects("Deployment", dep.Spec.Selector)
			svc := objs["Service"].(*corev1.Service)
			selects("Service", &metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" || svc.Spec.Ports[0].Name != "http" {
				t.Errorf("Service ports %+v, want one named http to the pods' http port", svc.Spec.Ports)
			}
			if o, ok := objs["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget); ok {
				selects("PodDisruptionBudget", o.Spec.Selector)
			}
			if o, ok := objs["NetworkPolicy"].(*networkingv1.NetworkPolicy); ok {
				selects("NetworkPolicy", &o.Spec.PodSelector)
				if len(o.Spec.Ingress) != 1 || len(o.Spec.Ingress[0].Ports) != 1 || o.Spec.Ingress[0].Ports[0].Port.IntValue() != 8080 {
					t.Errorf("NetworkPolicy ingress %+v, want one rule to port 8080", o.Spec.Ingress)
				}
			}
			if o, ok := objs["ServiceMonitor"].(*serviceMonitor); ok {
				s, _ := metav1.LabelSelectorAsSelector(&o.Spec.Selector)
				if !s.Matches(labels.Set(svc.Labels)) {
					t.Errorf("ServiceMonitor selector %v does not select the Service (labels %v)", o.Spec.Selector, svc.Labels)
				}
				if len(o.Spec.Endpoints) != 1 || o.Spec.Endpoints[0].Port != "http" || o.Spec.Endpoints[0].Path != "/metrics" {
					t.Errorf("ServiceMonitor endpoints %+v, want http /metrics", o.Spec.Endpoints)
				}
			}
			if o, ok := objs["HorizontalPodAutoscaler"].(*autoscalingv2.HorizontalPodAutoscaler); ok {
				if r := o.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != dep.Name || r.APIVersion != "apps/v1" {
					t.Errorf("HPA scales %+v, want the Deployment %s", r, dep.Name)
				}
			}
			if sa, ok := objs["ServiceAccount"].(*corev1.ServiceAccount); ok && dep.Spec.Template.Spec.ServiceAccountName != sa.Name {
				t.Errorf("pods run as %q, the chart's ServiceAccount is %q", dep.Spec.Template.Spec.ServiceAccountName, sa.Name)
			}
			for _, c := range dep.Spec.Template.Spec.TopologySpreadConstraints {
				selects("topologySpreadConstraint", c.LabelSelector)
			}
		})
	}
}
