package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scalingv1alpha1 "github.com/runbook-dev/runbook/api/scaling/v1alpha1"
	"github.com/runbook-dev/runbook/internal/savings"
)

var savingsNow = time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)

func q(s string) resource.Quantity { return resource.MustParse(s) }

// nightly: proj-a parked since 20:00 (3 pods of 250m/128Mi) on top of 10
// closed pod-hours; proj-b awake with 2 closed pod-hours. Priced in EUR.
func savingsScalers() []*scalingv1alpha1.NSScaler {
	since := metav1.NewTime(savingsNow.Add(-2 * time.Hour))
	nightly := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
	nightly.Spec.NamespacePrefix = "proj-"
	nightly.Spec.Prices = &scalingv1alpha1.SavingsPrices{Currency: "EUR", CPUCoreHour: ptr.To(q("0.04")), MemoryGiBHour: ptr.To(q("0.005"))}
	rate := savings.StatusRate(savings.Requests{MilliCPU: 250, MemBytes: 128 << 20}.Of(3))
	nightly.Status.Savings = &scalingv1alpha1.SavingsStatus{
		Since:         metav1.NewTime(time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)),
		SavingsTotals: scalingv1alpha1.SavingsTotals{PodHours: q("12"), CPUCoreHours: q("3"), MemoryGiBHours: q("1.5")},
		CurrentRate:   rate,
		Namespaces: []scalingv1alpha1.NamespaceSavings{
			{Namespace: "proj-a", SavingsTotals: scalingv1alpha1.SavingsTotals{PodHours: q("10"), CPUCoreHours: q("2.5"), MemoryGiBHours: q("1.25")}, CurrentRate: rate, RateSince: &since},
			{Namespace: "proj-b", SavingsTotals: scalingv1alpha1.SavingsTotals{PodHours: q("2"), CPUCoreHours: q("0.5"), MemoryGiBHours: q("0.25")}},
		},
	}
	idle := &scalingv1alpha1.NSScaler{ObjectMeta: metav1.ObjectMeta{Name: "idle"}}
	idle.Spec.NamespacePrefix = "idle-"
	return []*scalingv1alpha1.NSScaler{nightly, idle}
}

// mustSavingsRows is savingsRows of every NSScaler in cl at savingsNow.
func mustSavingsRows(t *testing.T, cl client.Client, since *time.Time) []SavingsRow {
	t.Helper()
	rows, err := savingsRows(context.Background(), cl, nil, savingsNow, since)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// wantSavingsTable fails t unless rows print as the table want.
func wantSavingsTable(t *testing.T, rows []SavingsRow, want string) {
	t.Helper()
	var out bytes.Buffer
	if err := printSavings(&out, rows, ""); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

// savingsJSON prints rows with -o json and reads them back.
func savingsJSON(t *testing.T, rows []SavingsRow) []SavingsRow {
	t.Helper()
	var out bytes.Buffer
	if err := printSavings(&out, rows, "json"); err != nil {
		t.Fatal(err)
	}
	var got []SavingsRow
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestSavingsTable(t *testing.T) {
	scalers := savingsScalers()
	rows := mustSavingsRows(t, fakeClient(nil, scalers[0], scalers[1]), nil)
	// proj-a: 10 + 3 pods × 2h = 16 pod-hours, 2.5 + 0.75 × 2 = 4 core-hours,
	// 1.25 + 0.375 × 2 = 2 GiB-hours; cost 4 × 0.04 + 2 × 0.005 = 0.17.
	want := `NSSCALER  NAMESPACE  PARKED PODS  POD-HOURS  CPU CORE-HOURS  MEMORY GIB-HOURS  COST      SINCE
idle      TOTAL      0            0.000      0.000           0.000             -         -
nightly   proj-a     3            16.000     4.000           2.000             0.17 EUR  2026-11-30T20:00:00Z
nightly   proj-b     0            2.000      0.500           0.250             0.02 EUR  2026-11-30T20:00:00Z
nightly   TOTAL      3            18.000     4.500           2.250             0.19 EUR  2026-11-30T20:00:00Z
TOTAL                3            18.000     4.500           2.250             -         -
`
	wantSavingsTable(t, rows, want)
}

func TestSavingsOneScalerAsJSON(t *testing.T) {
	scalers := savingsScalers()
	cl := fakeClient(nil, scalers[0], scalers[1])
	rows, err := savingsRows(context.Background(), cl, []string{"nightly"}, savingsNow.Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := savingsJSON(t, rows)
	if len(got) != 3 || got[2].Namespace != "TOTAL" || got[2].CPUCoreHours != "5.250" || got[0].PodHours != "19.000" || got[2].Currency != "EUR" {
		t.Fatalf("rows %+v", got)
	}
	if _, err := savingsRows(context.Background(), cl, []string{"nope"}, savingsNow, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("a missing NSScaler: %v", err)
	}
}
