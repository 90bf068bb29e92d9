package ratelimit

// DefaultMessage is the PT-BR detail a 429 of a rule of scope s carries
// when the rule sets no message, with "{retry_after}" standing for the
// seconds to wait ("" for an unknown scope).
func DefaultMessage(s Scope) string { return defaultMessages[s] }
