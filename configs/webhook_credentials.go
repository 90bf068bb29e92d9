package configs

import (
	"fmt"
	"slices"
	"strings"
)

// FlatSourceName is the name of the flat webhook section's source.
const FlatSourceName = "whatsapp"

// sourceCredential is what admits one webhook source's events: where its
// credentials come from (key: the variables that hold them) and, when they
// were read, their values.
type sourceCredential struct {
	name   string
	key    string
	values []string
}

// credentials lists every source's credential, the flat section's first.
func (w Webhook) credentials() []sourceCredential {
	reveal := func(s Secrets) []string {
		out := make([]string, 0, len(s))
		for _, v := range s {
			if v != "" {
				out = append(out, v.Reveal())
			}
		}
		return out
	}
	var out []sourceCredential
	if w.Path != "" {
		out = append(out, sourceCredential{name: FlatSourceName, key: "tokens:WEBHOOK_TOKENS", values: reveal(w.Tokens)})
	}
	for _, s := range w.Sources {
		c := sourceCredential{name: s.Name}
		var parts []string
		if s.Signature == nil || s.TokensEnv != "" {
			env, tokens := "WEBHOOK_TOKENS", w.Tokens
			if s.TokensEnv != "" {
				env, tokens = s.TokensEnv, s.Tokens
			}
			parts = append(parts, "tokens:"+env)
			c.values = append(c.values, reveal(tokens)...)
		}
		if sig := s.Signature; sig != nil {
			envs := append([]string{sig.SecretEnv}, sig.SecretEnvs...)
			parts = append(parts, "signature:"+sig.Scheme+":"+strings.Join(envs, ","))
			if s.TokensEnv == "" { // the signature alone admits it
				c.values = append(c.values, reveal(sig.Secrets)...)
			}
		}
		c.key = strings.Join(parts, "+")
		out = append(out, c)
	}
	return out
}

// CredentialGroups maps each webhook source's name (the flat section's
// FlatSourceName included) to its credential group: the sources that
// accept the same credential, read from the same variables or (when the
// values were read) sharing a value, are one group, named by its first
// source in configuration order. A holder of one group's credential can
// post as every source of the group, so the forwarder's breaker counts a
// group as one sender (docs/forwarder.md, "What the breaker counts";
// fresh attack pass 10, A05: two sources on WEBHOOK_TOKENS).
func (w Webhook) CredentialGroups() map[string]string {
	creds := w.credentials()
	parent := make([]int, len(creds))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		ra, rb := find(a), find(b)
		if ra > rb {
			ra, rb = rb, ra
		}
		parent[rb] = ra
	}
	for i := range creds {
		for j := i + 1; j < len(creds); j++ {
			shared := creds[i].key == creds[j].key
			for _, v := range creds[i].values {
				if !shared && slices.Contains(creds[j].values, v) {
					shared = true
				}
			}
			if shared {
				union(i, j)
			}
		}
	}
	out := make(map[string]string, len(creds))
	for i, c := range creds {
		out[c.name] = creds[find(i)].name
	}
	return out
}

// sharedCredentials warns about each webhook source whose credential
// another source accepts too: a holder of it can post events as both.
func (w Webhook) sharedCredentials() []string {
	groups := w.CredentialGroups()
	members := map[string][]string{}
	for _, c := range w.credentials() {
		members[groups[c.name]] = append(members[groups[c.name]], c.name)
	}
	var out []string
	for _, c := range w.credentials() {
		if groups[c.name] != c.name || len(members[c.name]) < 2 {
			continue
		}
		out = append(out, fmt.Sprintf("webhook.sources: sources %s accept the same credential (the same variables or a shared value): a holder of it can post events as each of them, and the forwarder counts them as one sender; give each provider its own tokens_env or secret (docs/webhooks.md, \"Sources\")",
			strings.Join(quoteAll(members[c.name]), ", ")))
	}
	return out
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}
