package configs

import (
	"errors"
	"strings"
	"testing"
)

func TestWebhookSourcesValidation(t *testing.T) {
	doc := `
webhook:
  path: /webhooks/whatsapp
  id_fields: [instance, "data..id"]
  sources:
    - name: zapster
      path: /webhooks/zapster
      id_fields: [id]
      tokens_env: ZAPSTER_TOKENS
      redact_fields: [apikey, "data.apikey"]
    - name: github
      path: /hooks/github
      signature: {scheme: github, secret_env: GH_SECRET}
    - name: github
      path: /hooks/github2
      signature: {scheme: github, secret_env: GH_SECRET}
`
	env := map[string]string{"ZAPSTER_TOKENS": "a, b", "GH_SECRET": "s1,s2"}
	_, err := Parse([]byte(doc), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse = %v, want a ValidationError", err)
	}
	got := strings.Join(ve.Problems, "\n")
	for _, want := range []string{"webhook.id_fields[1]", "webhook.sources[0].redact_fields[1]", "webhook.sources[2].name"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems %q do not name %s", got, want)
		}
	}
	if len(ve.Problems) != 3 {
		t.Errorf("problems = %q, want exactly 3", ve.Problems)
	}

	doc = strings.NewReplacer(`"data..id"`, "event", `, "data.apikey"`, "", "name: github\n      path: /hooks/github2", "name: github2\n      path: /hooks/github2").Replace(doc)
	cfg, err := Parse([]byte(doc), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Webhook.Sources
	if len(s[0].Tokens) != 2 || s[0].Tokens[1].Reveal() != "b" || len(s[1].Signature.Secrets) != 1 || s[1].Signature.Secrets[0].Reveal() != "s1,s2" || s[1].Signature.Tolerance.D().Minutes() != 5 {
		t.Errorf("sources = %+v", s)
	}
}

// A throttle that could never allow a failure, or never forget one, is a
// configuration error naming the field.
func TestWebhookAuthFailuresValidation(t *testing.T) {
	doc := `
webhook:
  path: /webhooks/whatsapp
  auth_failures: {per_ip: 0, per_source: -1, window: 0s, max_clients: 0}
`
	_, err := Parse([]byte(doc), func(string) (string, bool) { return "", false })
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse = %v, want a ValidationError", err)
	}
	got := strings.Join(ve.Problems, "\n")
	for _, want := range []string{"webhook.auth_failures.per_ip", "webhook.auth_failures.per_source", "webhook.auth_failures.window", "webhook.auth_failures.max_clients"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems %q do not name %s", got, want)
		}
	}
	cfg, err := Parse([]byte("webhook:\n  path: /webhooks/whatsapp\n  auth_failures: {per_ip: 5}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Webhook.AuthFailures; a.PerIP != 5 || a.PerSource != 600 || a.Window.D() != 60e9 || a.MaxClients != 10000 {
		t.Errorf("auth_failures = %+v, want per_ip 5 and the other defaults", a)
	}
}

// TestSigningSecretWithCommaIsOneSecret: a github signing secret holding
// a comma is one secret (it was split in two: a delivery signed with it
// got 401 and one signed with its first half 200); rotation goes through
// secret_envs; stripe and standard keep splitting on commas, which their
// secrets cannot hold; `borda config check` warns about the comma.
func TestSigningSecretWithCommaIsOneSecret(t *testing.T) {
	env := map[string]string{"GH": " half,other ", "GH_NEXT": "n,ext", "ST": "whsec_a, whsec_b", "EMPTY": " "}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		scheme, env string
		envs        []string
		want        []string
	}{
		{"github", "GH", nil, []string{"half,other"}},
		{"github", "GH", []string{"GH_NEXT"}, []string{"half,other", "n,ext"}},
		{"github", "", []string{"GH_NEXT", "EMPTY", "UNSET"}, []string{"n,ext"}},
		{"stripe", "ST", nil, []string{"whsec_a", "whsec_b"}},
		{"standard", "ST", []string{"GH"}, []string{"whsec_a", "whsec_b", "half,other"}},
		{"github", "UNSET", nil, nil},
	} {
		got := signingSecrets(tc.scheme, tc.env, tc.envs, lookup)
		var vals []string
		for _, s := range got {
			vals = append(vals, s.Reveal())
		}
		if strings.Join(vals, "|") != strings.Join(tc.want, "|") {
			t.Errorf("signingSecrets(%s, %q, %q) = %q, want %q", tc.scheme, tc.env, tc.envs, vals, tc.want)
		}
	}
	doc := `
webhook:
  sources:
    - name: github
      path: /hooks/github
      signature: {scheme: github, secret_env: GH}
`
	r := Check([]byte(doc), lookup)
	found := false
	for _, w := range r.Warnings {
		if w.Path == "webhook.sources[0].signature.secret_env" && strings.Contains(w.Message, "comma") {
			found = true
			if strings.Contains(w.Message, "half") || strings.Contains(w.Message, "other") {
				t.Errorf("the warning prints the secret: %s", w.Message)
			}
		}
	}
	if !found {
		t.Errorf("config check warnings %+v: none about the comma", r.Warnings)
	}
}

// `config check` says what `serve` refuses: a signing secret the ingress
// cannot use (whsec_ with an empty key, not base64, blank) is a warning
// naming the source, never a silent "valid".
func TestCheckWarnsOfAnUnusableSigningSecret(t *testing.T) {
	for _, v := range []string{"whsec_", "plainsecret", "whsec_!!!!"} {
		lookup := func(k string) (string, bool) {
			if k == "ST" {
				return v, true
			}
			return "", false
		}
		r := Check([]byte(`
webhook:
  sources:
    - name: st
      path: /hooks/st
      signature: {scheme: standard, secret_env: ST}
`), lookup)
		found := false
		for _, w := range r.Warnings {
			found = found || (strings.Contains(w.Message, "unusable") && strings.Contains(w.Message, `"st"`))
		}
		if !found {
			t.Errorf("ST=%q: warnings %+v, want one about the unusable secret", v, r.Warnings)
		}
	}
}

// TestCheckNamesAnUnsetSecretEnvsVariable (attack B47): a variable of
// secret_env/secret_envs that is unset or blank while others are set is a
// `config check` warning naming it (never a value), for every position in
// the list; with every one unset the source answers 503, as before.
func TestCheckNamesAnUnsetSecretEnvsVariable(t *testing.T) {
	env := map[string]string{"GH_A": "CANARYa", "GH_B": "CANARYb", "BLANK": "  "}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		secretEnv string
		envs      []string
		unset     []string
	}{
		{"GH_A", []string{"GH_TYPO"}, []string{"GH_TYPO"}},
		{"GH_A", []string{"GH_B", "BLANK"}, []string{"BLANK"}},
		{"GH_MISSING", []string{"GH_B"}, []string{"GH_MISSING"}},
		{"", []string{"GH_X", "GH_A", "GH_Y"}, []string{"GH_X", "GH_Y"}},
	} {
		doc := "webhook:\n  sources:\n    - name: gh\n      path: /hooks/github\n      signature: {scheme: github, secret_env: \"" + tc.secretEnv +
			"\", secret_envs: [" + strings.Join(tc.envs, ", ") + "]}\n"
		r := Check([]byte(doc), lookup)
		for _, name := range tc.unset {
			found := false
			for _, w := range r.Warnings {
				if strings.Contains(w.Message, name) && strings.Contains(w.Message, "unset") {
					found = true
				}
				if strings.Contains(w.Message, "CANARY") {
					t.Errorf("a warning prints a secret: %s", w.Message)
				}
			}
			if !found {
				t.Errorf("%q %v: warnings %+v name no %s", tc.secretEnv, tc.envs, r.Warnings, name)
			}
		}
	}
}
