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
	if len(s[0].Tokens) != 2 || s[0].Tokens[1].Reveal() != "b" || len(s[1].Signature.Secrets) != 2 || s[1].Signature.Tolerance.D().Minutes() != 5 {
		t.Errorf("sources = %+v", s)
	}
}
