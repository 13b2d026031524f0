package tlsreload

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Agent watches the mounted TLS files of one memcached and reloads its
// certificate in place when a renewal arrives. It needs no Kubernetes
// credentials: what it reads is the pod's own volume, what it talks to is
// the pod's own memcached on the loopback.
type Agent struct {
	// Dir is the TLS volume (tls.crt, tls.key, client-ca.crt).
	Dir string
	// AuthFile is memcached's auth file when memcached requires
	// authentication ("" when it does not).
	AuthFile string
	// Addr is memcached's address in the pod, 127.0.0.1:11211.
	Addr string
	// Mutual: memcached requires a client certificate; the agent presents
	// the server's own.
	Mutual bool
	// Interval is how often the volume is looked at (a readlink).
	Interval time.Duration
	// MaxBackoff bounds the wait between failed reload attempts.
	MaxBackoff time.Duration
	Log        *slog.Logger

	// startClientCA is the client CA memcached loaded at its start.
	startClientCA []byte
	// startCreds are the credentials memcached loaded at its start.
	startCreds *credentials
	// served is the certificate memcached serves.
	served *x509.Certificate
}

// errTrustChanged: the new files are not a renewal; the pod is replaced.
var errTrustChanged = errors.New("trust changed")

// Run watches until ctx ends. It returns an error only when it cannot
// start (memcached never served a certificate); after that every failure
// is logged and retried, never fatal, so memcached is never affected.
func (a *Agent) Run(ctx context.Context) error {
	start, err := readSnapshot(a.Dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", a.Dir, err)
	}
	a.startClientCA = start.clientCA
	if a.AuthFile != "" {
		if a.startCreds, err = readCredentials(a.AuthFile); err != nil {
			a.Log.Warn("cannot read the auth file; reloads will retry it", "error", err.Error())
		}
	}
	if err := a.waitServed(ctx, start); err != nil {
		return err
	}
	a.Log.Info("watching the TLS files", "dir", a.Dir, "serial", SerialHex(a.served), "notAfter", a.served.NotAfter.UTC())
	seen, backoff := start.version, time.Duration(0)
	var next time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(a.Interval):
		}
		v := a.version()
		if v == seen || time.Now().Before(next) {
			continue
		}
		err := a.consider(ctx, v)
		var final *finalError
		switch {
		case err == nil || errors.As(err, &final):
			seen, backoff = v, 0
		default:
			backoff = min(max(2*backoff, a.Interval), a.MaxBackoff)
			next = time.Now().Add(backoff)
			a.Log.Error("reload failed; retrying", "error", err.Error(), "retryIn", backoff.String())
		}
	}
}

// version is the kubelet's ..data target, or the files' digest when the
// directory is not a kubelet volume.
func (a *Agent) version() string {
	if v := volumeVersion(a.Dir); v != "" {
		return v
	}
	s, err := readSnapshot(a.Dir)
	if err != nil {
		return ""
	}
	return s.version
}

// waitServed waits until memcached serves a certificate.
func (a *Agent) waitServed(ctx context.Context, start snapshot) error {
	srv := a.server(start)
	for {
		leaf, err := srv.servedLeaf(ctx)
		if err == nil {
			a.served = leaf
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("memcached at %s served no certificate: %w", a.Addr, err)
		case <-time.After(a.Interval):
		}
	}
}

func (a *Agent) server(s snapshot) server {
	srv := server{addr: a.Addr}
	if a.Mutual && s.pair != nil {
		srv.clientCert = s.pair
	}
	return srv
}

// finalError is a decision, not a failure: retrying the same files cannot
// change it.
type finalError struct{ error }

// consider looks at the files of volume version v and reloads them when
// they are a renewal of what memcached serves.
func (a *Agent) consider(ctx context.Context, v string) error {
	detected := time.Now()
	snap, err := readSnapshot(a.Dir)
	if err != nil {
		return fmt.Errorf("reading the TLS files: %w", err)
	}
	log := a.Log.With("version", v, "servedSerial", SerialHex(a.served))
	switch {
	case snap.pairErr != nil:
		log.Error("not reloading: memcached keeps its current certificate", "error", snap.pairErr.Error())
		return &finalError{snap.pairErr}
	case bytes.Equal(snap.leaf.Raw, a.served.Raw):
		log.Info("the TLS files changed, the certificate did not")
		return nil
	case !SameIssuer(snap.leaf, a.served):
		log.Warn("not reloading: the new certificate has another issuer; the controller replaces this pod", "serial", SerialHex(snap.leaf))
		return &finalError{errTrustChanged}
	case !bytes.Equal(snap.clientCA, a.startClientCA):
		log.Warn("not reloading: the client CA changed; the controller replaces this pod", "serial", SerialHex(snap.leaf))
		return &finalError{errTrustChanged}
	}
	srv := a.server(snap)
	if err := a.refreshWithCredentials(ctx, srv); err != nil {
		return err
	}
	served, err := srv.servedLeaf(ctx)
	if err != nil {
		return fmt.Errorf("reading the certificate served after refresh_certs: %w", err)
	}
	if !bytes.Equal(served.Raw, snap.leaf.Raw) {
		return fmt.Errorf("after refresh_certs memcached serves serial %s, not %s", SerialHex(served), SerialHex(snap.leaf))
	}
	old := a.served
	a.served = served
	log.Info("reloaded the certificate in place", "oldSerial", SerialHex(old), "serial", SerialHex(served),
		"notAfter", served.NotAfter.UTC(), "sinceVolumeUpdate", sinceSwap(a.Dir, detected).String(),
		"reloadTook", time.Since(detected).Round(time.Millisecond).String())
	return nil
}

// refreshWithCredentials sends refresh_certs, authenticated as the first
// user memcached loaded at its start, else as the first of the file now.
func (a *Agent) refreshWithCredentials(ctx context.Context, srv server) error {
	if a.AuthFile == "" {
		return srv.refresh(ctx, nil)
	}
	var errs []error
	if a.startCreds != nil {
		err := srv.refresh(ctx, a.startCreds)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	current, err := readCredentials(a.AuthFile)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if a.startCreds != nil && *current == *a.startCreds {
		return errors.Join(errs...)
	}
	if err := srv.refresh(ctx, current); err != nil {
		return errors.Join(append(errs, err)...)
	}
	return nil
}

// sinceSwap is how long ago the kubelet swapped the volume's files (the
// modification time of ..data) when the agent saw it: the agent's own
// detection delay.
func sinceSwap(dir string, detected time.Time) time.Duration {
	fi, err := os.Lstat(filepath.Join(dir, dataLink))
	if err != nil {
		return 0
	}
	return detected.Sub(fi.ModTime()).Round(time.Millisecond)
}
