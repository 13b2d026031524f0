package realnode

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
)

// The seed demo on real containers: an UPDATE of demo_tbl in MariaDB
// replaces every container of the target exactly once (new container IDs
// from the node, the old ones stopped) with one Restarted event; a second
// UPDATE within minRestartInterval is one more restart, after the interval.
// The target is the sample's nginx Deployment running the web image (the
// only web server image the node has).
func TestSeedDemoOnRealContainers(t *testing.T) {
	runSeedDemo(t, "127.0.0.1:3306")
}

// runSeedDemo runs the seed demo against whichever manager runs now; it
// reaches MariaDB at dbAddr.
func runSeedDemo(t *testing.T, dbAddr string) {
	ctx := context.Background()
	const cooldown = 20 * time.Second
	admin, dbName := demoDatabase(t)
	ns := newNamespace(t)
	must(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-db", Labels: map[string]string{autorebootv1alpha1.UsableLabel: "true"}},
		StringData: map[string]string{"dsn": dbName + ":pw-" + dbName + "@tcp(" + dbAddr + ")/" + dbName},
	}))
	must(t, k8s.Create(ctx, realDeployment(ns, "nginx", 3)))
	before := waitContainers(t, ns, "nginx", 3, nil)

	must(t, k8s.Create(ctx, &autorebootv1alpha1.RebootPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nginx-on-demo-tbl"},
		Spec: autorebootv1alpha1.RebootPolicySpec{
			Target:             autorebootv1alpha1.TargetRef{APIVersion: "apps/v1", Kind: autorebootv1alpha1.KindDeployment, Name: "nginx"},
			MinRestartInterval: &metav1.Duration{Duration: cooldown},
			Policies: []autorebootv1alpha1.Policy{{
				Name: "demo-tbl",
				Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{
					Driver:         autorebootv1alpha1.DriverMySQL,
					DSNSecretRef:   autorebootv1alpha1.SecretKeySelector{Name: "demo-db", Key: "dsn"},
					Query:          "SELECT id, name FROM demo_tbl ORDER BY id",
					PeriodSeconds:  2,
					TimeoutSeconds: 2,
				}},
			}},
		},
	}))
	eventually(t, time.Minute, "the policy's first observation", func() error {
		p := getPolicy(t, ns, "nginx-on-demo-tbl")
		if len(p.Status.Policies) == 0 || p.Status.Policies[0].LastResult != autorebootv1alpha1.ResultSuccess {
			return fmt.Errorf("status %+v", p.Status)
		}
		return nil
	})

	t0 := time.Now()
	execSQL(t, admin, "UPDATE "+dbName+".demo_tbl SET name='ccc' WHERE id=1")
	after := waitContainers(t, ns, "nginx", 3, before)
	t.Logf("restart 1 after %s: containers %v -> %v", time.Since(t0).Round(time.Millisecond), short(before), short(after))
	assertStopped(t, before)
	if n := restartEvents(t, ns, "nginx-on-demo-tbl"); n != 1 {
		t.Fatalf("%d Restarted events after one change, want 1", n)
	}
	p1 := getPolicy(t, ns, "nginx-on-demo-tbl")
	if c := p1.Status.RestartCount; c != 1 {
		t.Fatalf("restartCount %d after one change, want 1", c)
	}
	firstRestart := restartedAt(t, ns, "nginx")

	// Within the cooldown: the second change waits for it, then restarts once.
	t1 := time.Now()
	execSQL(t, admin, "UPDATE "+dbName+".demo_tbl SET name='ddd' WHERE id=2")
	if in := t1.Sub(firstRestart); in >= cooldown-time.Second {
		t.Fatalf("the second change came %s after the first restart: not within the %s cooldown, the test proves nothing", in, cooldown)
	}
	third := waitContainers(t, ns, "nginx", 3, after)
	waited := time.Since(t1)
	t.Logf("restart 2 after %s (cooldown %s): containers %v -> %v", waited.Round(time.Millisecond), cooldown, short(after), short(third))
	p2 := getPolicy(t, ns, "nginx-on-demo-tbl")
	if c := p2.Status.RestartCount; c != 2 {
		t.Fatalf("restartCount %d after two changes, want 2", c)
	}
	// The restart stamp on the pod template is RFC 3339 (maybe whole seconds).
	if gap := restartedAt(t, ns, "nginx").Sub(firstRestart); gap < cooldown-time.Second {
		t.Fatalf("the second restart came %s after the first, inside the %s cooldown", gap, cooldown)
	} else {
		t.Logf("the restarts were %s apart (minRestartInterval %s)", gap, cooldown)
	}
	assertStopped(t, after)
	if n := restartEvents(t, ns, "nginx-on-demo-tbl"); n != 2 {
		t.Fatalf("%d Restarted events after two changes, want 2", n)
	}
}

func demoDatabase(t *testing.T) (*sql.DB, string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	dbName := "rn_e2e_" + hex.EncodeToString(b)
	conn, err := mysql.NewConnector(&mysql.Config{User: "root", Net: "tcp", Addr: "127.0.0.1:3306", AllowNativePasswords: true})
	must(t, err)
	admin := sql.OpenDB(conn)
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS '"+dbName+"'@'%'")
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE "+dbName)
		_ = admin.Close()
	})
	execSQL(t, admin, "CREATE DATABASE "+dbName)
	// The probe's user may only read: the manager refuses a more powerful one.
	execSQL(t, admin, "CREATE USER '"+dbName+"'@'%' IDENTIFIED BY 'pw-"+dbName+"'")
	execSQL(t, admin, "GRANT SELECT ON "+dbName+".* TO '"+dbName+"'@'%'")
	execSQL(t, admin, "CREATE TABLE "+dbName+".demo_tbl (id INT PRIMARY KEY, name VARCHAR(64))")
	execSQL(t, admin, "INSERT INTO "+dbName+".demo_tbl (id, name) VALUES (1, 'aaa'), (2, 'bbb')")
	return admin, dbName
}

// realDeployment runs replicas of the web image on the real node.
func realDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	pod := webPod("", map[string]string{"app": name})
	pod.Spec.Containers[0].Name = name
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec},
		},
	}
}

// waitContainers waits until the app's pods are exactly want Ready pods whose
// containers run on the node and none of which is in old; it returns their
// sorted container IDs.
func waitContainers(t *testing.T, ns, app string, want int, old []string) []string {
	t.Helper()
	var ids []string
	eventually(t, 3*time.Minute, fmt.Sprintf("%d new running containers of %s", want, app), func() error {
		var err error
		ids, err = newContainers(t, ns, app, want, old)
		return err
	})
	return ids
}

// newContainers returns the sorted container IDs of the app's pods when they
// are exactly want Ready pods whose containers run on the node and none of
// which is in old, or says what is not so yet.
func newContainers(t *testing.T, ns, app string, want int, old []string) ([]string, error) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.Set{"app": app}.String()})
	if err != nil {
		return nil, err
	}
	running := runningContainers(t, node)
	var ids []string
	for _, p := range pods.Items {
		id := containerID(&p)
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if p.DeletionTimestamp != nil || !ready || id == "" {
			return nil, fmt.Errorf("pod %s: ready %v, container %q, deleting %v", p.Name, ready, id, p.DeletionTimestamp != nil)
		}
		if slices.Contains(old, id) {
			return nil, fmt.Errorf("pod %s still runs old container %s", p.Name, id[:12])
		}
		if !slices.Contains(running, id) {
			return nil, fmt.Errorf("pod %s's container %s is not running on the node", p.Name, id[:12])
		}
		ids = append(ids, id)
	}
	if len(ids) != want {
		return nil, fmt.Errorf("%d pods, want %d", len(ids), want)
	}
	sort.Strings(ids)
	return ids, nil
}

// assertStopped fails when one of ids still runs on the node.
func assertStopped(t *testing.T, ids []string) {
	t.Helper()
	running := runningContainers(t, node)
	for _, id := range ids {
		if slices.Contains(running, id) {
			t.Errorf("replaced container %s still runs", id[:12])
		}
	}
}

func restartEvents(t *testing.T, ns, policy string) int {
	t.Helper()
	events, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + policy + ",reason=Restarted"})
	must(t, err)
	n := 0
	for _, e := range events.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

// restartedAt reads the restart stamp of a Deployment's pod template.
func restartedAt(t *testing.T, ns, name string) time.Time {
	t.Helper()
	var d appsv1.Deployment
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d))
	stamp, err := time.Parse(time.RFC3339, d.Spec.Template.Annotations[autorebootv1alpha1.RestartedAtAnnotation])
	must(t, err)
	return stamp
}

func getPolicy(t *testing.T, ns, name string) *autorebootv1alpha1.RebootPolicy {
	t.Helper()
	var p autorebootv1alpha1.RebootPolicy
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &p))
	return &p
}

func execSQL(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func short(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id[:12]
	}
	return out
}
