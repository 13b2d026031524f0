package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/probe"
)

// refusedError: the message cannot be sent as configured; no retry.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// post sends m once. Its errors are fixed phrases: never the URL (a
// credential), never the server's answer.
func (n *Notifier) post(ctx context.Context, m *notification) error {
	target, err := n.webhookURL(ctx, m)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"text": m.text})
	ctx, cancel := context.WithTimeout(ctx, n.settings.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return &refusedError{"the webhook URL is not usable"}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client(m.policy.Namespace).Do(req)
	if err != nil {
		var denied *egress.DeniedError
		if errors.As(err, &denied) {
			return &refusedError{denied.Error()}
		}
		if ctx.Err() != nil {
			return errors.New("timed out")
		}
		return egress.ErrConnectionFailed
	}
	// The answer is read into nothing, a bounded amount: never shown.
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxWebhookAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// webhookURL reads the URL from the labelled Secret, live.
func (n *Notifier) webhookURL(ctx context.Context, m *notification) (*url.URL, error) {
	s, o := probe.ReadUsableSecret(ctx, n.reader, m.policy.Namespace, m.secret.Name)
	if o != nil {
		if o.Reason == autorebootv1alpha1.ReasonSecretNotUsable {
			return nil, &refusedError{o.Message}
		}
		return nil, errors.New(o.Message)
	}
	raw, ok := s.Data[m.secret.Key]
	if !ok {
		return nil, &refusedError{fmt.Sprintf("Secret %s has no key %s", m.secret.Name, m.secret.Key)}
	}
	v := strings.TrimSpace(string(raw))
	u, err := url.Parse(v)
	if err != nil || len(v) > maxWebhookURL || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &refusedError{fmt.Sprintf("the value of %s in Secret %s is not an http(s) URL", m.secret.Key, m.secret.Name)}
	}
	return u, nil
}

// client dials through the egress guard of namespace, with the bounds of
// a probe's client (internal/probe/http_transport.go) and TLS verified as usual: a
// webhook is a real service with a real certificate. It follows no
// redirect (each would be another address to judge, and a webhook has no
// reason to redirect) and keeps no connection: messages are rare, and
// an idle connection per namespace would outlive most of them.
func (n *Notifier) client(namespace string) *http.Client {
	t := probe.TenantTransport(n.network.Dialer(namespace, n.settings.Timeout).DialContext, nil)
	t.TLSHandshakeTimeout, t.ResponseHeaderTimeout = n.settings.Timeout, n.settings.Timeout
	t.DisableKeepAlives = true
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
