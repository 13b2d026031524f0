package egress

import "errors"

// Categories name the rule that denied a dial. They are for the admin's logs
// and metrics only: shown to a tenant, they would tell which addresses are
// pods or Services of other namespaces.
const (
	CategoryUnixSocket            = "unix-socket"
	CategoryAdminDeny             = "admin-deny"
	CategoryUnspecified           = "unspecified"
	CategoryLoopback              = "loopback"
	CategoryMetadata              = "metadata"
	CategoryMulticast             = "multicast"
	CategoryLinkLocal             = "link-local"
	CategorySelf                  = "self"
	CategoryAPIServer             = "apiserver"
	CategoryServiceOtherNamespace = "service-other-namespace"
	CategoryPodOtherNamespace     = "pod-other-namespace"
	CategoryLookupFailed          = "lookup-failed"
	// CategoryInvalidAddress: a network other than tcp, udp or unix, or an
	// address that is not ip:port.
	CategoryInvalidAddress = "invalid-address"
)

const deniedMessage = "address not allowed by the manager's network policy"

// DeniedError is a dial refused by the policy. Its message is the same for
// every category, so it can be shown to the tenant as is.
type DeniedError struct {
	Category string
	// Err is why a lookup failed (CategoryLookupFailed), for the admin's
	// logs; it is not part of Error() and not unwrapped, so that errors.Is
	// on a tenant's dial error cannot tell timeouts of the apiserver apart.
	Err error
}

func (e *DeniedError) Error() string { return deniedMessage }

// ErrConnectionFailed is every dial failure other than a denial, as shown to
// tenants.
var ErrConnectionFailed = errors.New("connection failed")

// DialError turns a dial error into what a tenant may see: the *DeniedError
// if the policy refused the dial, otherwise ErrConnectionFailed. Refused,
// timed out, unreachable, reset and unresolvable all look the same so that a
// probe cannot be used to scan ports from the manager's position and tell
// closed from filtered. Log the original error for the admin if needed.
func DialError(err error) error {
	if err == nil {
		return nil
	}
	if denied, ok := errors.AsType[*DeniedError](err); ok {
		return denied
	}
	return ErrConnectionFailed
}
