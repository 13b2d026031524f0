package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	cachev1alpha1 "github.com/runbook-dev/runbook/api/cache/v1alpha1"
	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
)

// The seed demo's table: config/samples/..._sql.yaml restarts nginx when a
// row of test.demo_tbl changes.
const (
	mariaDBAddr  = "127.0.0.1:3306"
	demoUpdate   = "UPDATE demo_tbl SET name='ccc' WHERE id=1"
	demoTableDDL = "CREATE TABLE IF NOT EXISTS demo_tbl (id INT PRIMARY KEY, name VARCHAR(64))"
	demoRows     = "INSERT IGNORE INTO demo_tbl (id, name) VALUES (1, 'aaa'), (2, 'bbb')"
	// The sample's DSN user may only read the table, as a probe's user
	// should: the manager refuses more powerful ones (DSNTooPowerful).
	demoUser  = "CREATE USER IF NOT EXISTS 'runbook_probe'@'%' IDENTIFIED BY 'runbook-demo'"
	demoGrant = "GRANT SELECT ON test.demo_tbl TO 'runbook_probe'@'%'"
)

// prepareDemoTable creates test.demo_tbl with its two rows unless they are
// there already (a second demo keeps whatever the first changed), and the
// sample's user that may only read it.
func prepareDemoTable(ctx context.Context) error {
	conn, err := mysql.NewConnector(&mysql.Config{User: "root", Net: "tcp", Addr: mariaDBAddr, DBName: "test", AllowNativePasswords: true, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer func() { _ = db.Close() }()
	for _, q := range []string{demoTableDDL, demoRows, demoUser, demoGrant} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("MariaDB on %s (root, no password, database test): %s: %w", mariaDBAddr, q, err)
		}
	}
	return nil
}

// postgresAddr is the machine's PostgreSQL (trust), which the postgres
// sample queries as runbook_probe: a login with no privileges beyond
// PUBLIC's, as a probe's user should be.
const postgresAddr = "127.0.0.1:5432"

func preparePostgresUser(ctx context.Context) error {
	cfg, err := pgx.ParseConfig("postgres://postgres@" + postgresAddr + "/test?sslmode=disable&connect_timeout=5")
	if err != nil {
		return err
	}
	db := stdlib.OpenDB(*cfg)
	defer func() { _ = db.Close() }()
	const q = "DO $$ BEGIN CREATE ROLE runbook_probe LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("PostgreSQL on %s (postgres, trust, database test): %w", postgresAddr, err)
	}
	return nil
}

func demoScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{autorebootv1alpha1.AddToScheme, cachev1alpha1.AddToScheme, scalingv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// sampleState is one sample object and whether it is Ready (and why not).
type sampleState struct {
	name  string
	ready bool
	why   string
}

// readyCondition is ready when the condition of type t describes the
// current generation with status want; otherwise it says what it is.
func readyCondition(conds []metav1.Condition, gen int64, t string, want metav1.ConditionStatus) (bool, string) {
	c := meta.FindStatusCondition(conds, t)
	switch {
	case c == nil || c.ObservedGeneration < gen:
		return false, "waiting for the controller"
	case c.Status != want:
		return false, fmt.Sprintf("%s=%s %s: %s", t, c.Status, c.Reason, c.Message)
	}
	return true, ""
}

// policiesSucceed: every policy has a result, and it is Success (the probe
// reaches what it probes, the query and the watched object were read).
func policiesSucceed(p *autorebootv1alpha1.RebootPolicy) (bool, string) {
	for _, pol := range p.Spec.Policies {
		i := slices.IndexFunc(p.Status.Policies, func(ps autorebootv1alpha1.PolicyStatus) bool { return ps.Name == pol.Name })
		switch {
		case i < 0 || p.Status.Policies[i].LastResult == "":
			return false, fmt.Sprintf("policy %s: waiting for its first result", pol.Name)
		case p.Status.Policies[i].LastResult != autorebootv1alpha1.ResultSuccess:
			ps := p.Status.Policies[i]
			return false, fmt.Sprintf("policy %s: %s %s %s", pol.Name, ps.LastResult, ps.Reason, ps.Message)
		}
	}
	return true, ""
}

// sampleStates reads every sample's readiness: RebootPolicies Ready and not
// Degraded with every policy's last result Success, Memcacheds Available,
// NSScalers Ready and not Degraded (whether one parks now depends on its
// schedule and mode).
func sampleStates(ctx context.Context, cl client.Client) ([]sampleState, error) {
	var out []sampleState
	var rbps autorebootv1alpha1.RebootPolicyList
	if err := cl.List(ctx, &rbps, client.InNamespace("default")); err != nil {
		return nil, err
	}
	for _, p := range rbps.Items {
		s := sampleState{name: "RebootPolicy " + p.Name}
		if s.ready, s.why = readyCondition(p.Status.Conditions, p.Generation, autorebootv1alpha1.ConditionDegraded, metav1.ConditionFalse); s.ready {
			s.ready, s.why = readyCondition(p.Status.Conditions, p.Generation, autorebootv1alpha1.ConditionReady, metav1.ConditionTrue)
		}
		if s.ready {
			s.ready, s.why = policiesSucceed(&p)
		}
		out = append(out, s)
	}
	var mcs cachev1alpha1.MemcachedList
	if err := cl.List(ctx, &mcs, client.InNamespace("default")); err != nil {
		return nil, err
	}
	for _, m := range mcs.Items {
		s := sampleState{name: "Memcached " + m.Name}
		s.ready, s.why = readyCondition(m.Status.Conditions, m.Generation, cachev1alpha1.ConditionAvailable, metav1.ConditionTrue)
		out = append(out, s)
	}
	var nsss scalingv1alpha1.NSScalerList
	if err := cl.List(ctx, &nsss); err != nil {
		return nil, err
	}
	for _, n := range nsss.Items {
		s := sampleState{name: "NSScaler " + n.Name}
		if s.ready, s.why = readyCondition(n.Status.Conditions, n.Generation, scalingv1alpha1.ConditionReady, metav1.ConditionTrue); s.ready {
			s.ready, s.why = readyCondition(n.Status.Conditions, n.Generation, scalingv1alpha1.ConditionDegraded, metav1.ConditionFalse)
		}
		out = append(out, s)
	}
	return out, nil
}

// waitSamplesReady waits until every sample is Ready, printing what it still
// waits for whenever that changes. It returns how many are ready of how many.
func waitSamplesReady(ctx context.Context, cfg *rest.Config, out io.Writer, timeout time.Duration) (int, int, error) {
	cl, err := client.New(cfg, client.Options{Scheme: demoScheme()})
	if err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		states, err := sampleStates(ctx, cl)
		if err != nil {
			return 0, 0, err
		}
		var waiting []string
		for _, s := range states {
			if !s.ready {
				waiting = append(waiting, fmt.Sprintf("    %s: %s", s.name, s.why))
			}
		}
		slices.Sort(waiting)
		ready := len(states) - len(waiting)
		if len(waiting) == 0 || time.Now().After(deadline) {
			if len(waiting) > 0 {
				_, _ = fmt.Fprintf(out, "    not ready after %s:\n%s\n", timeout, strings.Join(waiting, "\n"))
			}
			return ready, len(states), nil
		}
		if now := strings.Join(waiting, "\n"); now != last {
			_, _ = fmt.Fprintf(out, "    %d of %d samples ready; waiting for:\n%s\n", ready, len(states), now)
			last = now
		}
		select {
		case <-ctx.Done():
			return ready, len(states), ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
