package rebootpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	autorebootv1alpha1 "github.com/runbook-dev/runbook/api/autoreboot/v1alpha1"
	weeklyv1alpha1 "github.com/runbook-dev/runbook/api/weekly/v1alpha1"
)

// windows is a restartSchedule of the given windows in the default zone.
func windows(ws ...weeklyv1alpha1.Window) *weeklyv1alpha1.Schedule {
	return &weeklyv1alpha1.Schedule{Windows: ws}
}

func httpProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(8080), Path: "/healthz"}}}
}

func validSpec() autorebootv1alpha1.RebootPolicySpec {
	return autorebootv1alpha1.RebootPolicySpec{
		Target: autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Name: "nginx"},
		Policies: []autorebootv1alpha1.Policy{{
			Name:    "health",
			Trigger: autorebootv1alpha1.Trigger{Probe: httpProbe()},
		}},
	}
}

func sqlTrigger() *autorebootv1alpha1.SQLTrigger {
	return &autorebootv1alpha1.SQLTrigger{Driver: autorebootv1alpha1.DriverMySQL, Query: "SELECT 1",
		DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"}, PeriodSeconds: 5, TimeoutSeconds: 2}
}

func TestValidationRejectsBadSpecs(t *testing.T) {
	ns := createNamespace(t, "validation")
	cases := []struct {
		name    string
		mutate  func(s *autorebootv1alpha1.RebootPolicySpec)
		message string
	}{
		{"target with name and selector", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Target.Selector = &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"app": "x"}}
		}, "exactly one of name or selector"},
		{"target with neither name nor selector", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Target.Name = "" }, "exactly one of name or selector"},
		{"unsupported target kind", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Target.Kind = "CronJob" }, `Unsupported value: "CronJob"`},
		{"unsupported target apiVersion", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Target.APIVersion = "apps/v2" }, `Unsupported value: "apps/v2"`},
		{"no policies", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies = nil }, "spec.policies"},
		{"duplicate policy names", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies = append(s.Policies, s.Policies[0]) }, "Duplicate value"},
		{"invalid policy name", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies[0].Name = "Bad_Name" }, "spec.policies[0].name"},
		{"trigger with nothing", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies[0].Trigger = autorebootv1alpha1.Trigger{} }, "exactly one of probe, sql, watch or referenced"},
		{"trigger with probe and sql", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies[0].Trigger.SQL = sqlTrigger() }, "exactly one of probe, sql, watch or referenced"},
		{"probe with two handlers", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger.Probe.TCPSocket = &corev1.TCPSocketAction{Host: "h", Port: intstr.FromInt(1)}
		}, "exactly one of exec, httpGet, tcpSocket or grpc"},
		{"probe without handler", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger.Probe = &corev1.Probe{PeriodSeconds: 5}
		}, "exactly one of exec, httpGet, tcpSocket or grpc"},
		{"httpGet without host", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies[0].Trigger.Probe.HTTPGet.Host = "" }, "httpGet.host (or trigger.probeHost) is required"},
		{"httpGet with a named port", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger.Probe.HTTPGet.Port = intstr.FromString("http")
		}, "port must be a number"},
		{"grpc without probeHost", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger.Probe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}
		}, "probeHost is required for a grpc probe"},
		{"probe period out of range", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies[0].Trigger.Probe.PeriodSeconds = -1 }, "periodSeconds must be between 1 and 86400"},
		{"probe failureThreshold out of range", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies[0].Trigger.Probe.FailureThreshold = -2 }, "failureThreshold must be between 1 and 1000"},
		{"probe timeout out of range", func(s *autorebootv1alpha1.RebootPolicySpec) { s.Policies[0].Trigger.Probe.TimeoutSeconds = 301 }, "timeoutSeconds must be between 1 and 300"},
		{"exec without command", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger.Probe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}
		}, "probe.exec.command must name a script"},
		{"sql with an unknown driver", func(s *autorebootv1alpha1.RebootPolicySpec) {
			q := sqlTrigger()
			q.Driver = "oracle"
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{SQL: q}
		}, `Unsupported value: "oracle"`},
		{"sql timeout above period", func(s *autorebootv1alpha1.RebootPolicySpec) {
			q := sqlTrigger()
			q.TimeoutSeconds = 10
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{SQL: q}
		}, "timeoutSeconds must not exceed periodSeconds"},
		{"sql period out of range", func(s *autorebootv1alpha1.RebootPolicySpec) {
			q := sqlTrigger()
			q.PeriodSeconds = 100000
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{SQL: q}
		}, "periodSeconds"},
		{"sql without query", func(s *autorebootv1alpha1.RebootPolicySpec) {
			q := sqlTrigger()
			q.Query = ""
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{SQL: q}
		}, "query"},
		{"sql without secret key", func(s *autorebootv1alpha1.RebootPolicySpec) {
			q := sqlTrigger()
			q.DSNSecretRef.Key = ""
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{SQL: q}
		}, "dsnSecretRef.key"},
		{"watch of an unsupported kind", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{Watch: &autorebootv1alpha1.WatchTrigger{Kind: "Pod", Name: "x"}}
		}, `Unsupported value: "Pod"`},
		{"minRestartInterval not a duration", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.MinRestartInterval = &metav1.Duration{Duration: -time.Second}
		}, "minRestartInterval"},
		{"minRestartInterval above a week", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.MinRestartInterval = &metav1.Duration{Duration: 200 * time.Hour}
		}, "minRestartInterval must be between 0s and 168h"},
		{"referenced and watch together", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{Referenced: &autorebootv1alpha1.ReferencedTrigger{},
				Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchConfigMap, Name: "x"}}
		}, "exactly one of probe, sql, watch or referenced"},
		{"referenced of an unsupported kind", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{Referenced: &autorebootv1alpha1.ReferencedTrigger{Kinds: []autorebootv1alpha1.WatchKind{"Pod"}}}
		}, `Unsupported value: "Pod"`},
		{"referenced exclusion without a name", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Policies[0].Trigger = autorebootv1alpha1.Trigger{Referenced: &autorebootv1alpha1.ReferencedTrigger{
				Exclude: []autorebootv1alpha1.ReferenceExclusion{{Kind: autorebootv1alpha1.WatchSecret}}}}
		}, "exclude[0].name"},
		{"settleDelay above a day", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.SettleDelay = &metav1.Duration{Duration: 25 * time.Hour}
		}, "settleDelay must be between 0s and 24h"},
		{"restart window with a bad time", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.RestartSchedule = windows(weeklyv1alpha1.Window{From: "25:00", To: "02:00"})
		}, "restartSchedule.windows[0].from"},
		{"restart window of no length", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.RestartSchedule = windows(weeklyv1alpha1.Window{From: "02:00", To: "02:00"})
		}, "from and to must differ"},
		{"restart window opening at 24:00", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.RestartSchedule = windows(weeklyv1alpha1.Window{From: "24:00", To: "02:00"})
		}, "from cannot be 24:00"},
		{"restart window on an unknown day", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.RestartSchedule = windows(weeklyv1alpha1.Window{Days: "Monday", From: "01:00", To: "02:00"})
		}, "restartSchedule.windows[0].days"},
		{"restart window with a day range left open", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.RestartSchedule = windows(weeklyv1alpha1.Window{Days: "Mon-", From: "01:00", To: "02:00"})
		}, "restartSchedule.windows[0].days"},
		{"restart schedule without a window", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.RestartSchedule = &weeklyv1alpha1.Schedule{TimeZone: "Europe/Berlin"}
		}, "a restartSchedule needs at least one window"},
		{"restart schedule with a time zone that is no name", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.RestartSchedule = windows(weeklyv1alpha1.Window{From: "01:00", To: "02:00"})
			s.RestartSchedule.TimeZone = "../../etc/passwd"
		}, "restartSchedule.timeZone"},
		{"rollout.maxConcurrent of zero", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: new(int32)}
		}, "maxConcurrent"},
		{"rollout.progressDeadline without a sequence", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Rollout = &autorebootv1alpha1.RolloutSpec{ProgressDeadline: &metav1.Duration{Duration: time.Minute}}
		}, "set rollout.maxConcurrent too"},
		{"rollout.progressDeadline below 30s", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: new(int32(1)), ProgressDeadline: &metav1.Duration{Duration: 10 * time.Second}}
		}, "between 30s and 30m"},
		{"rollout.progressDeadline above 30m", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Rollout = &autorebootv1alpha1.RolloutSpec{MaxConcurrent: new(int32(1)), ProgressDeadline: &metav1.Duration{Duration: time.Hour}}
		}, "between 30s and 30m"},
		{"an unknown approval mode", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Approval = "Sometimes"
		}, "approval"},
		{"notify without a Secret key", func(s *autorebootv1alpha1.RebootPolicySpec) {
			s.Notify = &autorebootv1alpha1.NotifySpec{WebhookSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "hook"}}
		}, "webhookSecretRef.key"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(&spec)
			rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-" + string(rune('a'+i%26))}, Spec: spec}
			err := k8s.Create(context.Background(), rbp)
			if err == nil {
				t.Fatalf("accepted: %+v", spec)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not mention %q", err, tc.message)
			}
		})
	}
	if len(cases) < 10 {
		t.Fatalf("only %d bad specs", len(cases))
	}
}

func TestValidationAcceptsAndDefaults(t *testing.T) {
	ns := createNamespace(t, "defaults")
	ctx := context.Background()
	specs := map[string]autorebootv1alpha1.RebootPolicySpec{}
	specs["probe"] = validSpec()
	sel := validSpec()
	sel.Target = autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDaemonSet, Selector: &autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"a": "b"}}}
	sel.Policies = []autorebootv1alpha1.Policy{
		{Name: "db", Trigger: autorebootv1alpha1.Trigger{SQL: &autorebootv1alpha1.SQLTrigger{Driver: autorebootv1alpha1.DriverPostgres, Query: "SELECT 1",
			DSNSecretRef: autorebootv1alpha1.SecretKeySelector{Name: "db", Key: "dsn"}}}},
		{Name: "cfg", Trigger: autorebootv1alpha1.Trigger{Watch: &autorebootv1alpha1.WatchTrigger{Kind: autorebootv1alpha1.WatchSecret, Name: "s", Keys: []string{"k"}}}},
		{Name: "grpc", Trigger: autorebootv1alpha1.Trigger{ProbeHost: "10.0.0.1", Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9000}}}}},
		{Name: "script", Trigger: autorebootv1alpha1.Trigger{Probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check.sh"}}}}}},
	}
	sel.MinRestartInterval = &metav1.Duration{Duration: 90 * time.Second}
	// Days and timeZone left out; 24:00 as an end.
	sel.RestartSchedule = windows(weeklyv1alpha1.Window{From: "22:00", To: "24:00"}, weeklyv1alpha1.Window{Days: "Sat,Sun", From: "00:00", To: "06:30:15"})
	sel.Suspend = true
	specs["all-triggers"] = sel
	for name, spec := range specs {
		rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
		if err := k8s.Create(ctx, rbp); err != nil {
			t.Fatalf("%s rejected: %v", name, err)
		}
	}
	got := getRBP(t, ns, "probe")
	if got.Spec.Target.APIVersion != "apps/v1" || got.Spec.MinRestartInterval == nil || got.Spec.MinRestartInterval.Duration != time.Minute {
		t.Fatalf("defaults not applied: %+v", got.Spec)
	}
	all := getRBP(t, ns, "all-triggers")
	if rs := all.Spec.RestartSchedule; rs == nil || rs.TimeZone != "UTC" || len(rs.Windows) != 2 || rs.Windows[0].Days != "Mon-Sun" || rs.Windows[1].Days != "Sat,Sun" {
		t.Fatalf("restartSchedule defaults not applied: %+v", rs)
	}
	q := all.Spec.Policies[0].Trigger.SQL
	if q.PeriodSeconds != 30 || q.TimeoutSeconds != 5 || all.Spec.Policies[1].Trigger.Watch.PeriodSeconds != 10 {
		t.Fatalf("trigger defaults not applied: %+v %+v", q, all.Spec.Policies[1].Trigger.Watch)
	}
}

func TestSelectorBattery(t *testing.T) {
	ns := createNamespace(t, "selectors")
	req := func(key string, op autorebootv1alpha1.SelectorOperator, values ...string) autorebootv1alpha1.SelectorRequirement {
		return autorebootv1alpha1.SelectorRequirement{Key: key, Operator: op, Values: values}
	}
	cases := []struct {
		name     string
		selector autorebootv1alpha1.TargetSelector
		message  string // "" means accepted
	}{
		{"unknown operator", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{req("app", "Foo", "x")}}, `Unsupported value: "Foo"`},
		{"In without values", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{req("app", autorebootv1alpha1.SelectorOpIn)}}, "In and NotIn need at least one value"},
		{"NotIn without values", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{req("app", autorebootv1alpha1.SelectorOpNotIn)}}, "In and NotIn need at least one value"},
		{"Exists with values", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{req("app", autorebootv1alpha1.SelectorOpExists, "x")}}, "Exists and DoesNotExist take none"},
		{"invalid expression value", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{req("app", autorebootv1alpha1.SelectorOpIn, "bad value!")}}, "values"},
		{"expression value too long", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{req("app", autorebootv1alpha1.SelectorOpIn, strings.Repeat("a", 64))}}, "values"},
		{"invalid expression key", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{req("-app", autorebootv1alpha1.SelectorOpExists)}}, "key"},
		{"invalid matchLabels value", autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"app": "a b"}}, "spec.target.selector.matchLabels.app"},
		{"matchLabels value too long", autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"app": autorebootv1alpha1.LabelValue(strings.Repeat("a", 64))}}, "spec.target.selector.matchLabels.app"},
		{"invalid matchLabels key", autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"bad key": "a"}}, "keys must be valid label keys"},
		{"matchLabels key with a bad prefix", autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"Example.COM/app": "a"}}, "keys must be valid label keys"},
		{"empty selector", autorebootv1alpha1.TargetSelector{}, "an empty selector would select every workload"},
		{"empty matchLabels", autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{}}, "an empty selector would select every workload"},
		{"valid labels", autorebootv1alpha1.TargetSelector{MatchLabels: map[string]autorebootv1alpha1.LabelValue{"app.kubernetes.io/name": "web", "tier": ""}}, ""},
		{"valid expressions", autorebootv1alpha1.TargetSelector{MatchExpressions: []autorebootv1alpha1.SelectorRequirement{
			req("tier", autorebootv1alpha1.SelectorOpIn, "front", "edge"), req("canary", autorebootv1alpha1.SelectorOpDoesNotExist)}}, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			spec.Target = autorebootv1alpha1.TargetRef{Kind: autorebootv1alpha1.KindDeployment, Selector: tc.selector.DeepCopy()}
			rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sel-%d", i)}, Spec: spec}
			err := k8s.Create(context.Background(), rbp)
			if tc.message == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				_ = k8s.Delete(context.Background(), rbp)
				return
			}
			if err == nil {
				_ = k8s.Delete(context.Background(), rbp)
				t.Fatalf("accepted: %+v", tc.selector)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not mention %q", err, tc.message)
			}
		})
	}
}

func TestProbeFieldsAreValidated(t *testing.T) {
	ns := createNamespace(t, "probefields")
	cases := []struct {
		name    string
		mutate  func(g *corev1.HTTPGetAction)
		message string
	}{
		{"port 0", func(g *corev1.HTTPGetAction) { g.Port = intstr.FromInt(0) }, "port must be between 1 and 65535"},
		{"port 70000", func(g *corev1.HTTPGetAction) { g.Port = intstr.FromInt(70000) }, "port must be between 1 and 65535"},
		{"scheme", func(g *corev1.HTTPGetAction) { g.Scheme = "GOPHER" }, "scheme must be HTTP or HTTPS"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := validSpec()
			tc.mutate(spec.Policies[0].Trigger.Probe.HTTPGet)
			rbp := &autorebootv1alpha1.RebootPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("probe-%d", i)}, Spec: spec}
			err := k8s.Create(context.Background(), rbp)
			if err == nil {
				_ = k8s.Delete(context.Background(), rbp)
				t.Fatalf("accepted")
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("error %q does not mention %q", err, tc.message)
			}
		})
	}
}
