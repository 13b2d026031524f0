package operations

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	"github.com/runbook-dev/runbook/test/cluster"
)

// privateMariaDB is a mariadbd of the test's own: its own data directory,
// TCP port and socket. The outage test stops it; stopping the machine's
// shared MariaDB on 127.0.0.1:3306 instead would break every other suite
// that uses it while `go test ./...` runs packages in parallel.
type privateMariaDB struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

func (m *privateMariaDB) socket() string { return filepath.Join(m.dir, "mysqld.sock") }

// startPrivateMariaDB initialises a data directory and starts the server
// listening on 127.0.0.1:<free port>; it is stopped and removed at cleanup.
func startPrivateMariaDB(t *testing.T) *privateMariaDB {
	t.Helper()
	for _, bin := range []string{"/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db"} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("the MariaDB outage test needs the MariaDB server package (%s): %v", bin, err)
		}
	}
	// A short path: a unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "ops-mdb-")
	if err != nil {
		t.Fatal(err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	m := &privateMariaDB{dir: dir, port: port}
	t.Cleanup(func() {
		m.stop(t)
		_ = os.RemoveAll(dir)
	})
	out, err := exec.Command("/usr/bin/mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"),
		"--user="+currentUser(), "--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m.start(t, true)
	return m
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// start runs mariadbd and waits until it answers on its socket. Without
// networking it listens on the socket only: TCP clients (the manager) still
// find it down.
func (m *privateMariaDB) start(t *testing.T, networking bool) {
	t.Helper()
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(m.dir, "data"), "--user=" + currentUser(),
		"--socket=" + m.socket(), "--pid-file=" + filepath.Join(m.dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(m.dir, "error.log"), "--innodb-buffer-pool-size=16M", "--skip-name-resolve"}
	if networking {
		args = append(args, "--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", m.port))
	} else {
		args = append(args, "--skip-networking")
	}
	m.cmd = exec.Command("/usr/sbin/mariadbd", args...)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting mariadbd: %v", err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(m.cmd, m.done)
	NewWithT(t).Eventually(func() error {
		select {
		case <-m.done:
			log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			return StopTrying("mariadbd exited:\n" + string(log))
		default:
		}
		db := m.admin()
		defer db.Close()
		return db.Ping()
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
}

// stop shuts the server down (SIGTERM, a clean shutdown) and waits for it.
func (m *privateMariaDB) stop(t *testing.T) {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
		t.Errorf("mariadbd ignored SIGTERM for 2 minutes")
	}
	m.cmd = nil
}

// admin connects over the unix socket, which works with or without
// networking.
func (m *privateMariaDB) admin() *sql.DB {
	c, err := mysql.NewConnector(&mysql.Config{User: "root", Net: "unix", Addr: m.socket(), AllowNativePasswords: true})
	if err != nil {
		panic(err) // the configuration above is static
	}
	return sql.OpenDB(c)
}

func (m *privateMariaDB) exec(g Gomega, queries ...string) {
	db := m.admin()
	defer db.Close()
	for _, q := range queries {
		_, err := db.Exec(q)
		g.Expect(err).NotTo(HaveOccurred(), q)
	}
}

// TestMariaDBOutage stops the MariaDB an sql trigger queries. While it is
// down the RebootPolicy is Degraded with the reason and the driver's error,
// and the target is not restarted. The change to the table is made during
// the outage: a database cannot be written while its server is stopped, so
// the server is brought up with networking off (socket only — for the
// manager, which connects over TCP, it is still down), the row is updated
// over the socket, and the server is stopped again. When MariaDB is back
// on TCP the policy turns Ready and the change made during the outage
// restarts the target exactly once.
func TestMariaDBOutage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mdb := startPrivateMariaDB(t)
	mdb.exec(g,
		"CREATE DATABASE opsdb",
		"CREATE TABLE opsdb.flags (id INT PRIMARY KEY, v VARCHAR(32))",
		"INSERT INTO opsdb.flags VALUES (1, 'a'), (2, 'b')",
		// The DSN's user may only read: the manager refuses more powerful ones.
		"CREATE USER 'probe'@'%' IDENTIFIED BY 'probe-pw'",
		"GRANT SELECT ON opsdb.* TO 'probe'@'%'")

	t.Setenv("POD_NAMESPACE", systemNamespace)
	m := startManager(t, saKubeconfig, "--controllers=rebootpolicy", fmt.Sprintf("--probe-allow=127.0.0.1:%d", mdb.port))
	ns := createNamespace(t, "mdb-"+suffix())
	dsn := fmt.Sprintf("probe:probe-pw@tcp(127.0.0.1:%d)/opsdb", mdb.port)
	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		StringData: map[string]string{"dsn": dsn},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, deployment(ns, "web", 2))).To(Succeed())
	g.Expect(k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target:             autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment, Name: "web"},
			MinRestartInterval: &metav1.Duration{},
			Policies: []autorebootv1alpha1.Policy{{
				Name: "flags",
				Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{
					Driver:         autorebootv1alpha1.DriverMySQL,
					DSNSecretRef:   autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"},
					Query:          "SELECT id, v FROM flags ORDER BY id",
					PeriodSeconds:  2,
					TimeoutSeconds: 1,
				}},
			}},
		},
	})).To(Succeed())
	waitBaseline(t, ns, "web")
	ready := func(g Gomega) {
		rbp := getRBP(g, ns, "web")
		g.Expect(meta.IsStatusConditionTrue(rbp.Status.Conditions, autorebootv1alpha1.ConditionReady)).To(BeTrue(), "conditions %+v", rbp.Status.Conditions)
		g.Expect(meta.IsStatusConditionFalse(rbp.Status.Conditions, autorebootv1alpha1.ConditionDegraded)).To(BeTrue(), "conditions %+v", rbp.Status.Conditions)
	}
	g.Eventually(ready, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { expectRestarts(g, ns, "web", "web", 0) }, timeout, poll).Should(Succeed())

	// Outage: Degraded with a clear reason, no restart.
	mdb.stop(t)
	stoppedAt := time.Now()
	degraded := func(g Gomega) {
		rbp := getRBP(g, ns, "web")
		c := meta.FindStatusCondition(rbp.Status.Conditions, autorebootv1alpha1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(autorebootv1alpha1.ReasonConnectFailed))
		// Fixed phrases: refused, filtered and unreachable look alike.
		g.Expect(c.Message).To(MatchRegexp(`connection (failed|lost)`))
		g.Expect(c.Message).NotTo(ContainSubstring(dsn))
		g.Expect(meta.IsStatusConditionFalse(rbp.Status.Conditions, autorebootv1alpha1.ConditionReady)).To(BeTrue())
		g.Expect(rbp.Status.Policies[0].LastResult).To(Equal(autorebootv1alpha1.ResultError))
	}
	g.Eventually(degraded, timeout, poll).Should(Succeed())
	c := meta.FindStatusCondition(getRBP(g, ns, "web").Status.Conditions, autorebootv1alpha1.ConditionDegraded)
	t.Logf("%s after MariaDB stopped: Degraded=%s %s: %s", time.Since(stoppedAt).Round(time.Millisecond), c.Status, c.Reason, c.Message)
	g.Consistently(func(g Gomega) {
		degraded(g)
		expectRestarts(g, ns, "web", "web", 0)
	}, 8*time.Second, time.Second).Should(Succeed())

	// The change, made while MariaDB is down for the manager.
	mdb.start(t, false)
	mdb.exec(g, "UPDATE opsdb.flags SET v = 'c' WHERE id = 1")
	g.Consistently(func(g Gomega) {
		degraded(g)
		expectRestarts(g, ns, "web", "web", 0)
	}, 4*time.Second, time.Second).Should(Succeed())
	mdb.stop(t)

	// Back: Ready, and exactly one restart for the one change.
	mdb.start(t, true)
	backAt := time.Now()
	g.Eventually(func(g Gomega) {
		expectRestarts(g, ns, "web", "web", 1)
		ready(g)
	}, timeout, poll).Should(Succeed())
	t.Logf("MariaDB back: Ready and the target restarted once within %s", time.Since(backAt).Round(time.Millisecond))
	g.Consistently(func(g Gomega) {
		expectRestarts(g, ns, "web", "web", 1)
		ready(g)
	}, 10*time.Second, time.Second).Should(Succeed())
	g.Expect(strings.Contains(m.Logs(), dsn)).To(BeFalse(), "the DSN leaked into the manager's logs")
}
