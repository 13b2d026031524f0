package alerts

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// answer is the part of /api/v1/query's envelope read here.
type answer struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

type vectorData struct {
	ResultType string `json:"resultType"`
	Result     []struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value"`
	} `json:"result"`
}

// parseAnswer reads an /api/v1/query answer into the alert names of its
// series.
func parseAnswer(code int, body []byte) ([]string, error) {
	var a answer
	jsonErr := json.Unmarshal(body, &a)
	if code < 200 || code > 299 {
		why := ""
		if jsonErr == nil && a.Error != "" {
			why = ": " + clip(a.ErrorType+": "+a.Error)
		}
		if code >= 500 || code == http.StatusTooManyRequests {
			return nil, unreachable("Prometheus answered HTTP %d%s", code, why)
		}
		return nil, invalid("Prometheus answered HTTP %d%s", code, why)
	}
	if jsonErr != nil {
		return nil, invalid("Prometheus's answer is not a query result (%s)", clip(jsonErr.Error()))
	}
	if a.Status != "success" {
		return nil, invalid("Prometheus answered status %q: %s", clip(a.Status), clip(a.ErrorType+": "+a.Error))
	}
	var d vectorData
	if err := json.Unmarshal(a.Data, &d); err != nil {
		return nil, invalid("Prometheus's answer is not a query result (%s)", clip(err.Error()))
	}
	if d.ResultType != "vector" {
		return nil, invalid("Prometheus answered a %q, not a vector", clip(d.ResultType))
	}
	names := make([]string, 0, len(d.Result))
	for _, s := range d.Result {
		n := s.Metric["alertname"]
		if n == "" {
			return nil, invalid("Prometheus answered a series without alertname")
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// clip keeps what a hostile answer may put into a message short and on
// one line.
func clip(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxErrorText {
		s = strings.ToValidUTF8(s[:maxErrorText], "") + "…"
	}
	return s
}
