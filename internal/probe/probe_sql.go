package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/internal/egress"
	"github.com/runbook-dev/runbook/internal/sqlguard"
)

// sqlProber runs the query through sqlguard (checked, read-only, bounded,
// through the network policy) and fingerprints the result with the
// manager's key. The DSN Secret is read before every query: consent (its
// usable label) is checked at each use, and a Secret that lost it closes
// the prepared connection. The DSN never leaves this struct.
type sqlProber struct {
	f         *Probers
	namespace string
	spec      autorebootv1alpha1.SQLTrigger

	db  *sqlguard.DB
	dsn []byte // what db was opened with
}

// mysqlFingerprintVersion marks MySQL fingerprints since the statement
// runs as the parser re-wrote it (its column names may read differently):
// a baseline of before is recorded anew rather than taken for a change.
const mysqlFingerprintVersion = "q2"

func newSQLProber(f *Probers, namespace string, spec autorebootv1alpha1.SQLTrigger) *sqlProber {
	return &sqlProber{f: f, namespace: namespace, spec: spec}
}

func (p *sqlProber) Kind() string { return TypeSQL }

func (p *sqlProber) Close() {
	if p.db != nil {
		_ = p.db.Close()
		p.db, p.dsn = nil, nil
	}
}

func (p *sqlProber) Probe(ctx context.Context) Observation {
	key, err := p.f.keys.Key(ctx)
	if err != nil {
		return keyUnavailable()
	}
	if o := p.prepare(ctx); o != nil {
		return *o
	}
	sum, err := p.db.Fingerprint(ctx, p.spec.Query, key.New)
	if err != nil {
		// A driver that failed leaves the DB unusable; the next probe
		// opens it anew.
		p.Close()
		reason, msg := sqlguard.Describe(err)
		return Observation{Result: autorebootv1alpha1.ResultError, Reason: reason, Message: msg}
	}
	if p.spec.Driver == autorebootv1alpha1.DriverMySQL {
		return Observation{Result: autorebootv1alpha1.ResultSuccess, Fingerprint: key.FormatHexVersion(mysqlFingerprintVersion, sum)}
	}
	return Observation{Result: autorebootv1alpha1.ResultSuccess, Fingerprint: key.FormatHex(sum)}
}

// prepare reads the Secret live and keeps db opened with its current DSN;
// a Secret that is gone or no longer labelled closes db (the Error it
// reports leaves the fingerprint baseline as it was, so labelling it
// again fires nothing by itself). A refusal names the Secret and at most
// a parameter, never a value.
func (p *sqlProber) prepare(ctx context.Context) *Observation {
	ref := p.spec.DSNSecretRef
	secret, o := ReadUsableSecret(ctx, p.f.reader, p.namespace, ref.Name)
	if o != nil {
		p.Close()
		return o
	}
	raw := secret.Data[ref.Key]
	if len(raw) == 0 {
		p.Close()
		return &Observation{Result: autorebootv1alpha1.ResultError, Reason: autorebootv1alpha1.ReasonSecretNotFound,
			Message: fmt.Sprintf("Secret %s has no key %s", ref.Name, ref.Key)}
	}
	if p.db != nil && bytes.Equal(raw, p.dsn) {
		return nil
	}
	p.Close()
	db, err := sqlguard.Open(strings.TrimSpace(string(raw)), sqlguard.Options{
		Driver:            string(p.spec.Driver),
		Dial:              p.f.network.Dialer(p.namespace, 0).DialContext,
		IsDenied:          isDenied,
		AllowUnixSockets:  p.f.settings.SQL.AllowUnixSockets,
		Limits:            p.f.settings.SQL.Limits,
		StatementTimeout:  Seconds(p.spec.TimeoutSeconds, 5),
		AllowPowerfulUser: p.f.settings.SQL.AllowPowerful,
	})
	if err != nil {
		reason, msg := sqlguard.Describe(err)
		return &Observation{Result: autorebootv1alpha1.ResultError, Reason: reason,
			Message: fmt.Sprintf("Secret %s key %s: %s", ref.Name, ref.Key, msg)}
	}
	p.db, p.dsn = db, bytes.Clone(raw)
	return nil
}

func isDenied(err error) bool {
	var d *egress.DeniedError
	return errors.As(err, &d)
}

// sqlClientGrace is how much longer than the server-side statement timeout
// the manager waits, so that the server stops the query and says so.
const SQLClientGrace = time.Second
