package sqlguard

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"
	"time"
)

type panickingConnector struct{}

func (panickingConnector) Connect(context.Context) (driver.Conn, error) { panic("hostile server") }
func (panickingConnector) Driver() driver.Driver                        { return nil }

func TestDriverPanicBecomesAnError(t *testing.T) {
	d := &DB{db: sql.OpenDB(panickingConnector{}), driver: Postgres, limits: Limits{}.withDefaults(),
		timeout: time.Second, wire: &wire{limit: 1 << 20}, mysqlTimeoutStmt: -1}
	defer d.Close()
	for range 2 {
		_, err := d.Fingerprint(context.Background(), "SELECT 1", testKey)
		wantReason(t, err, ReasonQueryFailed)
		if err.Error() != "driver failed" {
			t.Fatalf("message %q", err)
		}
	}
}
