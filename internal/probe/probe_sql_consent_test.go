package probe

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// TestSQLConsentReadAtEachUse: the DSN Secret's label is read before each
// query. Taking it away (or deleting the Secret) stops the queries at the
// next period and closes the prepared connection; giving it back does not
// fire by itself, because an Error keeps the baseline.
func TestSQLConsentReadAtEachUse(t *testing.T) {
	for _, be := range sqlBackends {
		t.Run(string(be.driver), func(t *testing.T) {
			ctx := context.Background()
			admin := plainDB(t, be.driver, be.dsn)
			dsn := selectOnlyUser(t, be.driver, admin, "")
			reader := fakeReader(usableSecret("db", map[string]string{"dsn": dsn}))
			c := reader.(client.Client)
			p := newSQLProber(testProbers(t, reader, Settings{}, be.addr), "app", autorebootv1alpha1.SQLTrigger{
				Driver: be.driver, Query: "SELECT 1", TimeoutSeconds: 5,
				DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"}})
			t.Cleanup(p.Close)
			st := newTriggerState(changeTrigger, 1, 1, PolicyState{})
			observe := func() Observation {
				o := p.Probe(ctx)
				st.observe(o, time.Time{})
				return o
			}
			setLabel := func(on bool) {
				var s corev1.Secret
				if err := c.Get(ctx, types.NamespacedName{Namespace: "app", Name: "db"}, &s); err != nil {
					t.Fatal(err)
				}
				s.Labels = nil
				if on {
					s.Labels = map[string]string{autorebootv1alpha1.UsableLabel: "true"}
				}
				if err := c.Update(ctx, &s); err != nil {
					t.Fatal(err)
				}
			}
			first := observe()
			if first.Result != ok || p.db == nil {
				t.Fatalf("first query: %+v", first)
			}
			baseline := st.published.Fingerprint

			setLabel(false)
			if o := observe(); o.Result != errR || o.Reason != autorebootv1alpha1.ReasonSecretNotUsable {
				t.Fatalf("after the label was removed: %+v", o)
			}
			if p.db != nil {
				t.Fatal("the connection of a Secret without consent stayed open")
			}
			if st.published.Fingerprint != baseline {
				t.Fatal("the Error replaced the baseline")
			}
			setLabel(true)
			if o := observe(); o.Result != ok || st.published.FireSeq != 0 || st.published.Message != "unchanged" {
				t.Fatalf("labelling the Secret again fired or lost the baseline: %+v %+v", o, st.published)
			}

			if err := c.Delete(ctx, usableSecret("db", nil)); err != nil {
				t.Fatal(err)
			}
			if o := observe(); o.Result != errR || o.Reason != autorebootv1alpha1.ReasonSecretNotUsable || p.db != nil {
				t.Fatalf("after the Secret was deleted: %+v (db open: %v)", o, p.db != nil)
			}
		})
	}
}

// TestSQLPowerfulDSNRefusedUnlessAllowed: the machine's root and postgres
// users are superusers; their DSN is refused unless the admin's flag says
// otherwise.
func TestSQLPowerfulDSNRefusedUnlessAllowed(t *testing.T) {
	for _, be := range sqlBackends {
		t.Run(string(be.driver), func(t *testing.T) {
			reader := fakeReader(usableSecret("db", map[string]string{"dsn": be.dsn}))
			spec := autorebootv1alpha1.SQLTrigger{Driver: be.driver, Query: "SELECT 1", TimeoutSeconds: 5,
				DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"}}
			p := newSQLProber(testProbers(t, reader, Settings{}, be.addr), "app", spec)
			t.Cleanup(p.Close)
			if o := p.Probe(context.Background()); o.Result != errR || o.Reason != autorebootv1alpha1.ReasonDSNTooPowerful {
				t.Fatalf("superuser DSN: %+v", o)
			}
			allowed := newSQLProber(testProbers(t, reader, Settings{SQL: SQLSettings{AllowPowerful: true}}, be.addr), "app", spec)
			t.Cleanup(allowed.Close)
			if o := allowed.Probe(context.Background()); o.Result != ok {
				t.Fatalf("superuser DSN with --sql-allow-powerful-users: %+v", o)
			}
		})
	}
}
