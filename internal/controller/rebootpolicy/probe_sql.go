package rebootpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/sqlguard"
)

// sqlProber runs the query through sqlguard (read-only, bounded, through
// the network policy) and fingerprints the result with the manager's key.
// The DSN is read from an opted-in Secret when a connection is needed and
// never leaves this struct.
type sqlProber struct {
	f         *probers
	namespace string
	spec      autorebootv1alpha1.SQLTrigger

	db *sqlguard.DB
}

func newSQLProber(f *probers, namespace string, spec autorebootv1alpha1.SQLTrigger) *sqlProber {
	return &sqlProber{f: f, namespace: namespace, spec: spec}
}

func (p *sqlProber) kind() string { return typeSQL }

func (p *sqlProber) close() {
	if p.db != nil {
		_ = p.db.Close()
		p.db = nil
	}
}

func (p *sqlProber) probe(ctx context.Context) observation {
	key, err := p.f.keys.Key(ctx)
	if err != nil {
		return keyUnavailable()
	}
	if p.db == nil {
		if o := p.open(ctx); o != nil {
			return *o
		}
	}
	sum, err := p.db.Fingerprint(ctx, p.spec.Query, key.New)
	if err != nil {
		// Reconnect (and re-read the Secret) next time: the DSN may have
		// been rotated.
		p.close()
		reason, msg := sqlguard.Describe(err)
		return observation{result: autorebootv1alpha1.ResultError, reason: reason, message: msg}
	}
	return observation{result: autorebootv1alpha1.ResultSuccess, fingerprint: key.FormatHex(sum)}
}

// open reads the DSN and prepares the connection; a refusal names the
// Secret and at most a parameter, never a value.
func (p *sqlProber) open(ctx context.Context) *observation {
	ref := p.spec.DSNSecretRef
	secret, o := readUsableSecret(ctx, p.f.reader, p.namespace, ref.Name)
	if o != nil {
		return o
	}
	raw := secret.Data[ref.Key]
	if len(raw) == 0 {
		return &observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonSecretNotFound,
			message: fmt.Sprintf("Secret %s has no key %s", ref.Name, ref.Key)}
	}
	db, err := sqlguard.Open(strings.TrimSpace(string(raw)), sqlguard.Options{
		Driver:           string(p.spec.Driver),
		Dial:             p.f.network.Dialer(p.namespace, 0).DialContext,
		IsDenied:         isDenied,
		AllowUnixSockets: p.f.settings.SQL.AllowUnixSockets,
		Limits:           p.f.settings.SQL.Limits,
		StatementTimeout: seconds(p.spec.TimeoutSeconds, 5),
	})
	if err != nil {
		reason, msg := sqlguard.Describe(err)
		return &observation{result: autorebootv1alpha1.ResultError, reason: reason,
			message: fmt.Sprintf("Secret %s key %s: %s", ref.Name, ref.Key, msg)}
	}
	p.db = db
	return nil
}

func isDenied(err error) bool {
	var d *egress.DeniedError
	return errors.As(err, &d)
}

// sqlClientGrace is how much longer than the server-side statement timeout
// the manager waits, so that the server stops the query and says so.
const sqlClientGrace = time.Second
