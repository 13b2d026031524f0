package autoreboot

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// sqlProber runs the query and fingerprints the result set. The DSN is read
// from the Secret (live, not cached) when a connection is needed and is kept
// out of every message.
type sqlProber struct {
	reader    client.Reader
	namespace string
	spec      autorebootv1alpha1.SQLTrigger

	db      *sql.DB
	secrets []string // DSN and password, redacted from messages
}

func newSQLProber(reader client.Reader, namespace string, spec autorebootv1alpha1.SQLTrigger) *sqlProber {
	return &sqlProber{reader: reader, namespace: namespace, spec: spec}
}

func (p *sqlProber) kind() string { return typeSQL }

func (p *sqlProber) close() {
	if p.db != nil {
		_ = p.db.Close()
		p.db = nil
	}
}

func (p *sqlProber) probe(ctx context.Context) observation {
	if p.db == nil {
		if o, ok := p.open(ctx); !ok {
			return o
		}
	}
	fp, err := queryFingerprint(ctx, p.db, p.spec.Query)
	if err != nil {
		// Reconnect (and re-read the Secret) next time: the DSN may have
		// been rotated.
		p.close()
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonProbeError, message: "query: " + p.redact(err.Error())}
	}
	return observation{result: autorebootv1alpha1.ResultSuccess, fingerprint: fp}
}

func (p *sqlProber) open(ctx context.Context) (observation, bool) {
	ref := p.spec.DSNSecretRef
	var secret corev1.Secret
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonSecretNotFound, message: fmt.Sprintf("secret %s not found", ref.Name)}, false
		}
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonProbeError, message: fmt.Sprintf("reading secret %s: %v", ref.Name, err)}, false
	}
	raw, ok := secret.Data[ref.Key]
	if !ok || len(raw) == 0 {
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonSecretNotFound, message: fmt.Sprintf("secret %s has no key %s", ref.Name, ref.Key)}, false
	}
	dsn := strings.TrimSpace(string(raw))
	connector, password, err := sqlConnector(p.spec.Driver, dsn)
	if err != nil {
		// Parse errors may quote the DSN: never pass them on.
		return observation{result: autorebootv1alpha1.ResultError, reason: autorebootv1alpha1.ReasonProbeError, message: fmt.Sprintf("secret %s key %s: invalid %s DSN", ref.Name, ref.Key, p.spec.Driver)}, false
	}
	p.secrets = []string{dsn}
	if password != "" {
		p.secrets = append(p.secrets, password)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(10 * time.Minute)
	p.db = db
	return observation{}, true
}

// sqlConnector builds a connector without registering drivers globally.
func sqlConnector(drv autorebootv1alpha1.SQLDriver, dsn string) (connector driver.Connector, password string, err error) {
	switch drv {
	case autorebootv1alpha1.DriverMySQL:
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, "", err
		}
		c, err := mysql.NewConnector(cfg)
		return c, cfg.Passwd, err
	case autorebootv1alpha1.DriverPostgres:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, "", err
		}
		return stdlib.GetConnector(*cfg), cfg.Password, nil
	}
	return nil, "", fmt.Errorf("unknown driver %q", drv)
}

func (p *sqlProber) redact(msg string) string {
	for _, s := range p.secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	return msg
}

// queryFingerprint is the sha256 of the column names and every value of
// every row, in order, each length-prefixed so that no two different
// result sets encode the same way.
func queryFingerprint(ctx context.Context, db *sql.DB, query string) (string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return "", err
	}
	defer func() { _ = rows.Close() }()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	writeField := func(b []byte, null bool) {
		var n [9]byte
		if null {
			n[0] = 1
		}
		binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, c := range cols {
		writeField([]byte(c), false)
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		h.Write([]byte{0xff}) // row separator
		for _, v := range vals {
			writeField(v, v == nil)
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", errors.New("query timed out")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
