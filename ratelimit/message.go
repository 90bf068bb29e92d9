package ratelimit

import (
	"strconv"
	"strings"
	"time"
)

// DefaultMessage is the PT-BR detail a 429 of a rule of scope s carries
// when the rule sets no message, with "{retry_after}" standing for the
// seconds to wait ("" for an unknown scope).
func DefaultMessage(s Scope) string { return defaultMessages[s] }

// Default PT-BR messages per scope, used when a rule sets no message.
// {retry_after} is replaced by the whole seconds of Retry-After.
var defaultMessages = map[Scope]string{
	ScopeIP:     "Muitas requisições deste endereço. Tente novamente em {retry_after} segundos.",
	ScopeUser:   "Você fez muitas requisições. Tente novamente em {retry_after} segundos.",
	ScopeEscola: "Sua escola atingiu o limite de requisições. Tente novamente em {retry_after} segundos.",
	ScopeRoute:  "Este serviço recebeu muitas requisições. Tente novamente em {retry_after} segundos.",
}

// expandMessage replaces {retry_after} in msg with retry in whole seconds
// (≥ 1).
func expandMessage(msg string, retry time.Duration) string {
	if !strings.Contains(msg, "{retry_after}") {
		return msg
	}
	return strings.ReplaceAll(msg, "{retry_after}", strconv.FormatInt(max(ceilSeconds(retry), 1), 10))
}
