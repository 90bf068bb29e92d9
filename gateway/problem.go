package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// problem is an RFC 9457 problem detail the gateway answers itself (400,
// 404, 408, 431, 500, 502, 504, 505), in PT-BR like every user-facing message of Borda.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	RequestID string `json:"request_id,omitempty"`
}

// PT-BR titles and details of the gateway's own errors.
var (
	problemNotFound = problem{Title: "Rota não encontrada", Status: http.StatusNotFound,
		Detail: "Nenhum serviço atende a este endereço."}
	problemBadGateway = problem{Title: "Serviço indisponível", Status: http.StatusBadGateway,
		Detail: "Não foi possível contatar o serviço de destino. Tente novamente em instantes."}
	problemDenied = problem{Title: "Acesso negado", Status: http.StatusForbidden,
		Detail: "Este endereço ou cliente não tem permissão para acessar este serviço."}
	problemLoop = problem{Title: "Laço de encaminhamento", Status: http.StatusLoopDetected,
		Detail: "A requisição voltou a este gateway pelo próprio serviço de destino; verifique a configuração da rota."}
	problemGatewayTimeout = problem{Title: "Tempo de resposta esgotado", Status: http.StatusGatewayTimeout,
		Detail: "O serviço de destino demorou demais para responder. Tente novamente em instantes."}
	problemEscapedSlash = problem{Title: "Endereço inválido", Status: http.StatusBadRequest,
		Detail: "O caminho contém uma barra codificada (%2F ou %5C) ou uma barra invertida, que este serviço não aceita."}
	problemPathControl = problem{Title: "Endereço inválido", Status: http.StatusBadRequest,
		Detail: "O caminho contém um caractere de controle (como %00)."}
	problemPathDoubleEncoded = problem{Title: "Endereço inválido", Status: http.StatusBadRequest,
		Detail: "O caminho contém uma codificação dupla (como %252F ou %252E)."}
	problemPathHiddenDot = problem{Title: "Endereço inválido", Status: http.StatusBadRequest,
		Detail: "O caminho contém um segmento \".\" ou \"..\" disfarçado (com ;parâmetros ou barras codificadas)."}
	problemDuplicateAuthorization = problem{Title: "Credenciais ambíguas", Status: http.StatusBadRequest,
		Detail: "A requisição tem mais de um cabeçalho Authorization; envie apenas um."}
	problemConflictingCredentials = problem{Title: "Credenciais ambíguas", Status: http.StatusBadRequest,
		Detail: "A requisição traz mais de uma credencial diferente (cookies olp_auth repetidos, ou um cookie e um cabeçalho Authorization que não coincidem) e nenhuma delas é a única válida. Saia e entre novamente para limpar as credenciais antigas."}
	problemTooManyCredentials = problem{Title: "Credenciais demais", Status: http.StatusBadRequest,
		Detail: "A requisição traz credenciais diferentes demais (cookies olp_auth repetidos, cabeçalho Authorization). Saia e entre novamente para limpar as credenciais antigas."}
	problemBadTarget = problem{Title: "Requisição inválida", Status: http.StatusBadRequest,
		Detail: "O alvo da requisição não é um caminho (use /caminho)."}
	problemVersionNotSupported = problem{Title: "Versão do HTTP não suportada", Status: http.StatusHTTPVersionNotSupported,
		Detail: "Este endereço atende HTTP/1.1; o prefácio do HTTP/2 sem TLS não é aceito."}
	problemMalformedBody = problem{Title: "Corpo da requisição malformado", Status: http.StatusBadRequest,
		Detail: "O corpo da requisição não segue o enquadramento HTTP (codificação chunked inválida)."}
	problemRequestTimeout = problem{Title: "Tempo de envio esgotado", Status: http.StatusRequestTimeout,
		Detail: "O corpo da requisição não chegou a tempo. Envie a requisição novamente."}
	problemInternal = problem{Title: "Erro interno", Status: http.StatusInternalServerError,
		Detail: "Ocorreu um erro inesperado no gateway. Tente novamente em instantes."}
)

// writeProblem writes p as application/problem+json with
// Content-Language: pt-BR, replacing any body headers already set.
func writeProblem(w http.ResponseWriter, p problem, requestID string) {
	p.Type = "about:blank"
	p.RequestID = requestID
	body, _ := json.Marshal(p)
	body = append(body, '\n')
	h := w.Header()
	h.Del("Content-Encoding")
	h.Del("Content-Range")
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Language", "pt-BR")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// pathProblem is the 400 answer to a refused request path.
func pathProblem(f pathFault) problem {
	switch f {
	case pathControl:
		return problemPathControl
	case pathDoubleEncoded:
		return problemPathDoubleEncoded
	case pathHiddenDot:
		return problemPathHiddenDot
	}
	return problemEscapedSlash
}
