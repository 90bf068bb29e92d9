package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/olp-edu/borda/configs"
)

// compose is the part of the Compose specification the tests look at.
type compose struct {
	Services map[string]composeService `yaml:"services"`
	Networks map[string]struct {
		Internal bool `yaml:"internal"`
	} `yaml:"networks"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Ports       []string          `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Labels      map[string]string `yaml:"labels"`
	Networks    any               `yaml:"networks"`
	Healthcheck *struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

func (s composeService) healthy() bool {
	return s.Healthcheck != nil && !s.Healthcheck.Disable && len(s.Healthcheck.Test) > 0
}

func loadCompose(t *testing.T, path string) compose {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	return c
}

// repoRoot is the module root (this package is deploy/).
const repoRoot = ".."

func TestComposeServices(t *testing.T) {
	c := loadCompose(t, filepath.Join(repoRoot, "docker-compose.yml"))
	want := []string{"consume-events", "forward", "migrate", "postgres", "rabbitmq", "redis", "serve", "upstream"}
	var got []string
	for name := range c.Services {
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
	images := map[string]string{
		"redis":    "redis:",
		"rabbitmq": "rabbitmq:3.13-management",
		"postgres": "postgres:",
		"upstream": "nginx:",
	}
	for name, prefix := range images {
		if img := c.Services[name].Image; !strings.HasPrefix(img, prefix) {
			t.Errorf("%s.image = %q, want %s…", name, img, prefix)
		}
	}
	for name, s := range c.Services {
		if strings.HasSuffix(s.Image, ":latest") || (s.Image != "" && !strings.Contains(s.Image, ":")) {
			t.Errorf("%s.image = %q: pin a tag", name, s.Image)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s.ports %q: bind development ports to 127.0.0.1", name, p)
			}
		}
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			if !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
				continue
			}
			switch d.Condition {
			case "service_healthy":
				if !target.healthy() {
					t.Errorf("%s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
				}
			case "service_completed_successfully", "service_started":
			default:
				t.Errorf("%s.depends_on.%s.condition = %q", name, dep, d.Condition)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	for _, name := range []string{"redis", "rabbitmq", "postgres", "upstream", "serve"} {
		if !c.Services[name].healthy() {
			t.Errorf("%s has no healthcheck", name)
		}
	}
	for _, name := range []string{"migrate", "serve", "forward", "consume-events"} {
		s := c.Services[name]
		if s.Build == nil {
			t.Errorf("%s is not built from the Dockerfile", name)
		}
		if len(s.Command) == 0 || s.Command[0] != name {
			t.Errorf("%s.command = %v, want [%s]", name, s.Command, name)
		}
	}
	if !slices.Contains(c.Services["serve"].Ports, "127.0.0.1:8080:8080") {
		t.Errorf("serve.ports = %v, want 127.0.0.1:8080:8080", c.Services["serve"].Ports)
	}
	if got := c.Services["serve"].Healthcheck.Test; !slices.Contains(got, "healthcheck") || !slices.Contains(got, "/healthz") {
		t.Errorf("serve.healthcheck.test = %v, want borda healthcheck on /healthz", got)
	}
	order := map[string]map[string]string{
		"migrate":        {"postgres": "service_healthy"},
		"serve":          {"redis": "service_healthy", "rabbitmq": "service_healthy", "migrate": "service_completed_successfully"},
		"forward":        {"rabbitmq": "service_healthy", "serve": "service_healthy"},
		"consume-events": {"rabbitmq": "service_healthy", "migrate": "service_completed_successfully"},
	}
	for svc, deps := range order {
		for dep, cond := range deps {
			if got := c.Services[svc].DependsOn[dep].Condition; got != cond {
				t.Errorf("%s.depends_on.%s = %q, want %q", svc, dep, got, cond)
			}
		}
	}
	// The mounted config validates with the environment compose gives it.
	env := c.Services["serve"].Environment
	cfg := parseConfig(t, filepath.Join(repoRoot, "deploy/compose/borda.yaml"), env)
	if cfg.KeyPrefix() != "olp-dev:" {
		t.Errorf("compose key prefix = %q, want olp-dev:", cfg.KeyPrefix())
	}
	if cfg.StoreKind() != "redis" {
		t.Errorf("compose store = %s, want redis", cfg.StoreKind())
	}
	if len(cfg.Webhook.Tokens) == 0 {
		t.Error("compose sets no WEBHOOK_TOKENS")
	}
}

func TestTraefikTopology(t *testing.T) {
	c := loadCompose(t, filepath.Join(repoRoot, "deploy/traefik/docker-compose.yml"))
	for name, s := range c.Services {
		if name != "traefik" && len(s.Ports) > 0 {
			t.Errorf("%s publishes %v; only traefik may publish ports", name, s.Ports)
		}
		if s.Image == "" || strings.HasSuffix(s.Image, ":latest") {
			t.Errorf("%s.image = %q: pin a tag", name, s.Image)
		}
	}
	tr := c.Services["traefik"]
	if !strings.HasPrefix(tr.Image, "traefik:v3") {
		t.Errorf("traefik.image = %q, want traefik:v3.x", tr.Image)
	}
	if !c.Networks["backend"].Internal {
		t.Error("the backend network must be internal")
	}
	b := c.Services["borda"]
	if b.Labels["traefik.enable"] != "true" {
		t.Error("borda is not enabled in Traefik")
	}
	defined := map[string]bool{}
	for k := range b.Labels {
		if rest, ok := strings.CutPrefix(k, "traefik.http.middlewares."); ok {
			name, rest, _ := strings.Cut(rest, ".")
			kind, _, _ := strings.Cut(rest, ".")
			defined[name] = true
			defined["kind:"+kind] = true
		}
	}
	if !defined["kind:ratelimit"] || !defined["kind:buffering"] {
		t.Error("want a ratelimit and a buffering (body limit) middleware")
	}
	for k, v := range b.Labels {
		if strings.HasPrefix(k, "traefik.http.routers.") && strings.HasSuffix(k, ".middlewares") {
			for _, m := range strings.Split(v, ",") {
				if !defined[m] {
					t.Errorf("%s uses undefined middleware %q", k, m)
				}
			}
		}
		if strings.HasSuffix(k, ".entrypoints") && v != "websecure" {
			t.Errorf("%s = %q, want websecure (TLS only)", k, v)
		}
	}
	env := map[string]string{}
	for k, v := range b.Environment {
		env[k] = strings.NewReplacer("${", "", "}", "").Replace(v)
	}
	env["WEBHOOK_TOKENS"] = strings.Repeat("x", 32) // production refuses shorter tokens
	cfg := parseConfig(t, filepath.Join(repoRoot, "deploy/traefik/borda.yaml"), env)
	if cfg.KeyPrefix() != "olp:" {
		t.Errorf("traefik key prefix = %q, want olp:", cfg.KeyPrefix())
	}
	traefikIP := "172.30.0.2"
	if !slices.Contains(cfg.TrustedProxies, traefikIP+"/32") || len(cfg.TrustedProxies) != 1 {
		t.Errorf("trusted_proxies = %v, want only Traefik's %s/32", cfg.TrustedProxies, traefikIP)
	}
}

// k8sObject is the part of a Kubernetes object the tests look at.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec map[string]any `yaml:"spec"`
	Data map[string]any `yaml:"data"`
	raw  map[string]any
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

func loadManifests(t *testing.T, dir string) []k8sObject {
	t.Helper()
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	decodeFile(t, filepath.Join(dir, "kustomization.yaml"), &kust)
	var out []k8sObject
	for _, res := range kust.Resources {
		data, err := os.ReadFile(filepath.Join(dir, res))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("parsing %s: %v", res, err)
			}
			var o k8sObject
			if err := node.Decode(&o); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			if err := node.Decode(&o.raw); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			out = append(out, o)
		}
	}
	return out
}

// podContainers returns the containers of a Deployment, Job or CronJob.
func podContainers(t *testing.T, o k8sObject) []container {
	t.Helper()
	spec := o.raw["spec"]
	path := []string{"template", "spec", "containers"}
	if o.Kind == "CronJob" {
		path = append([]string{"jobTemplate", "spec"}, path...)
	}
	for _, p := range path {
		m, ok := spec.(map[string]any)
		if !ok {
			t.Fatalf("%s/%s: no %v", o.Kind, o.Metadata.Name, path)
		}
		spec = m[p]
	}
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var cs []container
	if err := yaml.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestKubernetesManifests(t *testing.T) {
	objs := loadManifests(t, filepath.Join(repoRoot, "deploy/kubernetes/base"))
	byName := map[string]k8sObject{}
	for _, o := range objs {
		byName[o.Kind+"/"+o.Metadata.Name] = o
		if o.Kind == "Secret" {
			t.Errorf("Secret/%s is inline; reference secrets by name only", o.Metadata.Name)
		}
	}
	for _, want := range []string{
		"Deployment/borda-proxy", "Deployment/borda-webhook", "Deployment/borda-forward",
		"Deployment/borda-consume-events", "Service/borda-proxy", "Service/borda-webhook",
		"PodDisruptionBudget/borda-proxy", "PodDisruptionBudget/borda-webhook",
		"CronJob/borda-aggregate", "Job/borda-migrate", "Ingress/borda",
	} {
		if _, ok := byName[want]; !ok {
			t.Errorf("missing %s", want)
		}
	}
	probes := map[string][2]string{ // liveness, readiness
		"borda-proxy":   {"/healthz", "/readyz/proxy"},
		"borda-webhook": {"/healthz", "/readyz/webhook"},
		// The workers: liveness never depends on Redis, the database or the
		// endpoint (they pause and resume by themselves).
		"borda-forward":        {"/healthz", "/readyz"},
		"borda-consume-events": {"/healthz", "/readyz"},
	}
	args := map[string]string{
		"Deployment/borda-proxy": "serve", "Deployment/borda-webhook": "serve",
		"Deployment/borda-forward": "forward", "Deployment/borda-consume-events": "consume-events",
		"CronJob/borda-aggregate": "aggregate", "Job/borda-migrate": "migrate",
	}
	for key, arg := range args {
		o, ok := byName[key]
		if !ok {
			continue
		}
		cs := podContainers(t, o)
		if len(cs) != 1 {
			t.Fatalf("%s: %d containers, want 1", key, len(cs))
		}
		c := cs[0]
		if len(c.Args) == 0 || c.Args[0] != arg {
			t.Errorf("%s args = %v, want [%s]", key, c.Args, arg)
		}
		if want, ok := probes[o.Metadata.Name]; ok {
			if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != want[0] {
				t.Errorf("%s liveness probe = %+v, want %s", key, c.LivenessProbe, want[0])
			}
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != want[1] {
				t.Errorf("%s readiness probe = %+v, want %s", key, c.ReadinessProbe, want[1])
			}
		}
		for _, e := range c.Env {
			secretish := strings.Contains(e.Name, "URL") || strings.Contains(e.Name, "TOKEN") || strings.Contains(e.Name, "SECRET")
			if secretish && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s env %s: take it from a Secret (secretKeyRef), not a value", key, e.Name)
			}
		}
		if o.Metadata.Name == "borda-proxy" || o.Metadata.Name == "borda-webhook" {
			for _, e := range c.Env {
				if e.Name == "DATABASE_URL" {
					t.Errorf("%s gets DATABASE_URL: aggregation runs in CronJob/borda-aggregate, not in serve", key)
				}
			}
		}
	}
	// Every PDB selects the pods of a Deployment.
	for _, o := range objs {
		if o.Kind != "PodDisruptionBudget" {
			continue
		}
		if _, ok := byName["Deployment/"+o.Metadata.Name]; !ok {
			t.Errorf("PodDisruptionBudget/%s has no Deployment of that name", o.Metadata.Name)
		}
	}
}

func TestKubernetesOverlays(t *testing.T) {
	for env, prefix := range map[string]string{"staging": "olp-stg:", "production": "olp:"} {
		t.Run(env, func(t *testing.T) {
			dir := filepath.Join(repoRoot, "deploy/kubernetes/overlays", env)
			var kust struct {
				Namespace          string `yaml:"namespace"`
				ConfigMapGenerator []struct {
					Name     string   `yaml:"name"`
					Files    []string `yaml:"files"`
					Literals []string `yaml:"literals"`
				} `yaml:"configMapGenerator"`
			}
			decodeFile(t, filepath.Join(dir, "kustomization.yaml"), &kust)
			if kust.Namespace != "borda-"+env {
				t.Errorf("namespace = %q, want borda-%s", kust.Namespace, env)
			}
			lookup := map[string]string{"WEBHOOK_TOKENS": strings.Repeat("x", 32)}
			var file string
			for _, g := range kust.ConfigMapGenerator {
				switch g.Name {
				case "borda-config":
					if len(g.Files) == 1 {
						file = g.Files[0]
					}
				case "borda-env":
					for _, l := range g.Literals {
						k, v, _ := strings.Cut(l, "=")
						lookup[k] = v
					}
				}
			}
			if file != "borda.yaml" {
				t.Fatalf("borda-config must be generated from borda.yaml (the mounted file name), got %q", file)
			}
			if lookup["ENVIRONMENT"] != env {
				t.Errorf("borda-env ENVIRONMENT = %q, want %s", lookup["ENVIRONMENT"], env)
			}
			// The file alone and the file with the ConfigMap's environment
			// agree, so the prefix can never flip between the two.
			alone := parseConfig(t, filepath.Join(dir, file), map[string]string{"WEBHOOK_TOKENS": strings.Repeat("x", 32)})
			cfg := parseConfig(t, filepath.Join(dir, file), lookup)
			if alone.Environment != cfg.Environment {
				t.Errorf("config says environment %q, ENVIRONMENT says %q", alone.Environment, cfg.Environment)
			}
			if cfg.KeyPrefix() != prefix || !strings.HasPrefix(cfg.KeyPrefix(), configs.EnvPrefix(env)) {
				t.Errorf("key prefix = %q, want %s", cfg.KeyPrefix(), prefix)
			}
		})
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{
		"CGO_ENABLED=0", "-trimpath", "-X main.version=${VERSION}", "-s -w",
		"USER 65532:65532", "HEALTHCHECK", `"/borda", "healthcheck"`, "distroless/static",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if strings.Count(s, "\nFROM ") < 2 {
		t.Error("Dockerfile is not multi-stage")
	}
}

func decodeFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
}

func parseConfig(t *testing.T, path string, env map[string]string) configs.Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Parse(data, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg
}

// A PodDisruptionBudget with minAvailable equal to its Deployment's
// replicas never lets a drain evict a pod: staging scaled borda-proxy to
// 1 replica while the base PDB kept minAvailable: 2, so `kubectl drain`
// of its node would wait for ever.
func TestPodDisruptionBudgetsAllowAnEvictionInEveryOverlay(t *testing.T) {
	base := loadManifests(t, filepath.Join(repoRoot, "deploy/kubernetes/base"))
	for _, env := range []string{"staging", "production"} {
		t.Run(env, func(t *testing.T) {
			var kust struct {
				Patches []struct {
					Target struct {
						Kind string `yaml:"kind"`
						Name string `yaml:"name"`
					} `yaml:"target"`
					Patch string `yaml:"patch"`
				} `yaml:"patches"`
			}
			decodeFile(t, filepath.Join(repoRoot, "deploy/kubernetes/overlays", env, "kustomization.yaml"), &kust)
			replicas := map[string]int{}
			for _, o := range base {
				if o.Kind == "Deployment" {
					n, _ := o.Spec["replicas"].(int)
					replicas[o.Metadata.Name] = max(n, 1) // absent: Kubernetes' default of 1
				}
			}
			for _, p := range kust.Patches {
				if p.Target.Kind != "Deployment" {
					continue
				}
				var ops []struct {
					Op    string `yaml:"op"`
					Path  string `yaml:"path"`
					Value any    `yaml:"value"`
				}
				if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
					t.Fatalf("patch of %s: %v", p.Target.Name, err)
				}
				for _, op := range ops {
					if n, ok := op.Value.(int); ok && op.Path == "/spec/replicas" {
						replicas[p.Target.Name] = n
					}
				}
			}
			for _, o := range base {
				if o.Kind != "PodDisruptionBudget" {
					continue
				}
				n := replicas[o.Metadata.Name]
				if v, ok := o.Spec["minAvailable"].(int); ok && v >= n {
					t.Errorf("PodDisruptionBudget/%s minAvailable %d with %d replicas: no pod can ever be evicted (use maxUnavailable: 1)", o.Metadata.Name, v, n)
				}
				if v, ok := o.Spec["maxUnavailable"].(int); ok && v < 1 {
					t.Errorf("PodDisruptionBudget/%s maxUnavailable %d: no pod can ever be evicted", o.Metadata.Name, v)
				}
			}
		})
	}
}

// shutdownSlack is what SIGTERM → exit may take beyond readiness_grace +
// drain + confirm_drain: gateway.Shutdown's 1 s unwind bound.
const shutdownSlack = time.Second

// shutdownMargin is the least time left between the shutdown budget and
// the SIGKILL (log flush, a loaded node).
const shutdownMargin = 3 * time.Second

// The production overlay's phases (preStop 5 s + drain 20 s + 10 s for
// confirms) added up past the 30 s terminationGracePeriodSeconds, so a
// slow drain ended in SIGKILL with webhooks unanswered. Every Deployment
// running `borda serve` must fit preStop + readiness_grace + drain +
// confirm_drain + unwind, with a margin, in its grace period, and keep
// accepting for at least 5 s after termination starts (readiness_grace
// or a preStop sleep) so no connection is refused while the endpoint is
// still routed.
func TestShutdownBudgetFitsTerminationGracePeriod(t *testing.T) {
	base := loadManifests(t, filepath.Join(repoRoot, "deploy/kubernetes/base"))
	for _, env := range []string{"staging", "production"} {
		t.Run(env, func(t *testing.T) {
			cfg := parseConfig(t, filepath.Join(repoRoot, "deploy/kubernetes/overlays", env, "borda.yaml"), map[string]string{"WEBHOOK_TOKENS": strings.Repeat("x", 32)})
			sd := cfg.Shutdown
			for _, o := range base {
				if o.Kind != "Deployment" {
					continue
				}
				cs := podContainers(t, o)
				if len(cs) == 0 || len(cs[0].Args) == 0 || cs[0].Args[0] != "serve" {
					continue
				}
				var pod struct {
					Template struct {
						Spec struct {
							Grace      *int `yaml:"terminationGracePeriodSeconds"`
							Containers []struct {
								Lifecycle struct {
									PreStop struct {
										Sleep struct {
											Seconds int `yaml:"seconds"`
										} `yaml:"sleep"`
									} `yaml:"preStop"`
								} `yaml:"lifecycle"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				}
				b, _ := yaml.Marshal(o.Spec)
				if err := yaml.Unmarshal(b, &pod); err != nil {
					t.Fatal(err)
				}
				grace := 30 * time.Second // Kubernetes' default
				if g := pod.Template.Spec.Grace; g != nil {
					grace = time.Duration(*g) * time.Second
				}
				preStop := time.Duration(pod.Template.Spec.Containers[0].Lifecycle.PreStop.Sleep.Seconds) * time.Second
				total := preStop + sd.ReadinessGrace.D() + sd.Drain.D() + sd.ConfirmDrain.D() + shutdownSlack
				if total+shutdownMargin > grace {
					t.Errorf("Deployment/%s: preStop %v + readiness_grace %v + drain %v + confirm_drain %v + unwind %v = %v, leaving less than %v of terminationGracePeriodSeconds %v",
						o.Metadata.Name, preStop, sd.ReadinessGrace, sd.Drain, sd.ConfirmDrain, shutdownSlack, total, shutdownMargin, grace)
				}
				if preStop+sd.ReadinessGrace.D() < 5*time.Second {
					t.Errorf("Deployment/%s: accepts for only %v after termination starts (preStop + readiness_grace); endpoints and the ingress need about 5 s to drop the pod",
						o.Metadata.Name, preStop+sd.ReadinessGrace.D())
				}
			}
		})
	}
}
