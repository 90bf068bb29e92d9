package deploy

import (
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// networkPolicy is the part of a NetworkPolicy the test reads.
type networkPolicy struct {
	Spec struct {
		PodSelector struct {
			MatchExpressions []struct {
				Key      string   `yaml:"key"`
				Operator string   `yaml:"operator"`
				Values   []string `yaml:"values"`
			} `yaml:"matchExpressions"`
		} `yaml:"podSelector"`
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []struct {
			From []struct {
				NamespaceSelector *struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"namespaceSelector"`
				PodSelector *struct{} `yaml:"podSelector"`
				IPBlock     *struct{} `yaml:"ipBlock"`
			} `yaml:"from"`
			Ports []struct {
				Port any `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
	} `yaml:"spec"`
}

// selects reports whether p's pod selector matches labels.
func (p networkPolicy) selects(labels map[string]string) bool {
	for _, e := range p.Spec.PodSelector.MatchExpressions {
		v, ok := labels[e.Key]
		switch e.Operator {
		case "In":
			if !ok || !slices.Contains(e.Values, v) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(e.Values, v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// The shipped overlays trust the pod CIDR as proxies, so every pod of
// the cluster that could reach the serve pods could name any client IP
// (fresh attack pass A064). Every borda Deployment's pods are selected by
// a NetworkPolicy; the serve pods' http port is reachable only from the
// ingress controller's namespace, and every admin port only from the
// monitoring namespace; no rule admits every source.
func TestNetworkPoliciesLetOnlyTheIngressControllerSpeakAsAProxy(t *testing.T) {
	objs := loadManifests(t, filepath.Join(repoRoot, "deploy/kubernetes/base"))
	var policies []networkPolicy
	for _, o := range objs {
		if o.Kind != "NetworkPolicy" {
			continue
		}
		b, _ := yaml.Marshal(o.raw)
		var p networkPolicy
		if err := yaml.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Spec.PolicyTypes, []string{"Ingress"}) {
			t.Errorf("NetworkPolicy/%s: policyTypes %v, want [Ingress]", o.Metadata.Name, p.Spec.PolicyTypes)
		}
		for _, r := range p.Spec.Ingress {
			if len(r.From) == 0 {
				t.Errorf("NetworkPolicy/%s: a rule without from admits every source", o.Metadata.Name)
			}
			for _, f := range r.From {
				if f.NamespaceSelector == nil || len(f.NamespaceSelector.MatchLabels) == 0 || f.PodSelector != nil || f.IPBlock != nil {
					t.Errorf("NetworkPolicy/%s: a source other than one named namespace", o.Metadata.Name)
				}
			}
		}
		policies = append(policies, p)
	}
	want := map[string]map[string]string{ // component → port name → the namespace that may reach it
		"proxy":          {"http": "ingress-nginx", "admin": "monitoring"},
		"webhook":        {"http": "ingress-nginx", "admin": "monitoring"},
		"forward":        {"admin": "monitoring"},
		"consume-events": {"admin": "monitoring"},
	}
	for _, o := range objs {
		if o.Kind != "Deployment" {
			continue
		}
		labels := map[string]string{}
		if tmpl, ok := o.Spec["template"].(map[string]any); ok {
			if md, ok := tmpl["metadata"].(map[string]any); ok {
				if ls, ok := md["labels"].(map[string]any); ok {
					for k, v := range ls {
						labels[k], _ = v.(string)
					}
				}
			}
		}
		comp := labels["app.kubernetes.io/component"]
		got := map[string]string{}
		selected := false
		for _, p := range policies {
			if !p.selects(labels) {
				continue
			}
			selected = true
			for _, r := range p.Spec.Ingress {
				for _, port := range r.Ports {
					name, _ := port.Port.(string)
					for _, f := range r.From {
						got[name] = f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
					}
				}
			}
		}
		if !selected {
			t.Errorf("Deployment/%s: no NetworkPolicy selects its pods (any pod of the cluster reaches them)", o.Metadata.Name)
			continue
		}
		for port, ns := range want[comp] {
			if got[port] != ns {
				t.Errorf("Deployment/%s: port %s reachable from %q, want only namespace %q", o.Metadata.Name, port, got[port], ns)
			}
		}
		for port := range got {
			if _, ok := want[comp][port]; !ok {
				t.Errorf("Deployment/%s: port %s is opened, which nothing needs", o.Metadata.Name, port)
			}
		}
	}
}
