package configs

import (
	"maps"
	"strings"
	"testing"
)

// TestCredentialGroupsJoinSourcesOneHolderCanPostAs (fresh attack pass 10,
// A05): sources that take the same variables, or (values read) share a
// value, are one credential group; the flat section is "whatsapp".
func TestCredentialGroupsJoinSourcesOneHolderCanPostAs(t *testing.T) {
	tokens := func(v ...string) Secrets {
		out := make(Secrets, len(v))
		for i, s := range v {
			out[i] = Secret(s)
		}
		return out
	}
	sig := func(env string, secrets ...string) *WebhookSignature {
		return &WebhookSignature{Scheme: "github", SecretEnv: env, Secrets: tokens(secrets...)}
	}
	for _, c := range []struct {
		name string
		w    Webhook
		want map[string]string
	}{
		{"two sources on WEBHOOK_TOKENS", Webhook{Path: "/w", Tokens: tokens("t1"), Sources: []WebhookSource{{Name: "zap"}}},
			map[string]string{"whatsapp": "whatsapp", "zap": "whatsapp"}},
		{"own tokens_env", Webhook{Path: "/w", Tokens: tokens("t1"), Sources: []WebhookSource{{Name: "zap", TokensEnv: "ZAP", Tokens: tokens("t2")}}},
			map[string]string{"whatsapp": "whatsapp", "zap": "zap"}},
		{"own tokens_env holding a shared value", Webhook{Path: "/w", Tokens: tokens("t1", "t9"), Sources: []WebhookSource{{Name: "zap", TokensEnv: "ZAP", Tokens: tokens("t9")}}},
			map[string]string{"whatsapp": "whatsapp", "zap": "whatsapp"}},
		{"values not read: the variables decide", Webhook{Sources: []WebhookSource{{Name: "a", TokensEnv: "A"}, {Name: "b", TokensEnv: "B"}, {Name: "c", TokensEnv: "A"}}},
			map[string]string{"a": "a", "b": "b", "c": "a"}},
		{"signed, one secret variable", Webhook{Sources: []WebhookSource{{Name: "gh1", Signature: sig("GH", "s")}, {Name: "gh2", Signature: sig("GH", "s")}, {Name: "st", Signature: sig("ST", "x")}}},
			map[string]string{"gh1": "gh1", "gh2": "gh1", "st": "st"}},
		{"signed, one secret in two variables", Webhook{Sources: []WebhookSource{{Name: "gh1", Signature: sig("GH1", "s")}, {Name: "gh2", Signature: sig("GH2", "s")}}},
			map[string]string{"gh1": "gh1", "gh2": "gh1"}},
		{"signed beside a token source", Webhook{Path: "/w", Tokens: tokens("t1"), Sources: []WebhookSource{{Name: "gh", Signature: sig("GH", "t1x")}}},
			map[string]string{"whatsapp": "whatsapp", "gh": "gh"}},
		{"token and signature: the pair", Webhook{Path: "/w", Tokens: tokens("t1"), Sources: []WebhookSource{{Name: "both", TokensEnv: "B", Tokens: tokens("t3"), Signature: sig("GH", "s")}}},
			map[string]string{"whatsapp": "whatsapp", "both": "both"}},
	} {
		if got := c.w.CredentialGroups(); !maps.Equal(got, c.want) {
			t.Errorf("%s: groups %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSharedCredentialsAreWarned: config check names the sources a holder
// of one credential can post as.
func TestSharedCredentialsAreWarned(t *testing.T) {
	w := Webhook{Path: "/w", Tokens: Secrets{"t1"}, Sources: []WebhookSource{{Name: "zap"}, {Name: "own", TokensEnv: "OWN", Tokens: Secrets{"t2"}}}}
	got := w.sharedCredentials()
	if len(got) != 1 || !strings.Contains(got[0], `"whatsapp", "zap"`) || strings.Contains(got[0], `"own"`) || strings.Contains(got[0], "t1") {
		t.Errorf("warnings %q, want one naming whatsapp and zap, without the value", got)
	}
	w.Sources = w.Sources[1:]
	if got := w.sharedCredentials(); len(got) != 0 {
		t.Errorf("warnings %q for sources with their own credentials", got)
	}
}
