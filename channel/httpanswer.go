package channel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// maxProviderBody bounds how much of a provider's answer the HTTP adapters read (an
// error document or an acceptance is a few hundred bytes).
const maxProviderBody = 64 << 10

// providerRetryAfter reads a Retry-After header: delay-seconds or an HTTP date (RFC 9110
// §10.2.3), relative to now, as RetryAfter. 0 when absent, malformed or already past.
func providerRetryAfter(h http.Header, now time.Time) time.Duration {
	return RetryAfter(h.Get("Retry-After"), now)
}

// providerTransportError classifies a failure to get an answer at all (a timeout, a
// refused or broken connection, a cancelled context) as Transient with Status 0.
// A timeout says so in the message ("timed out: ...").
func providerTransportError(provider string, err error) *Error {
	if isTimeout(err) {
		err = fmt.Errorf("timed out: %w", err)
	}
	return &Error{Provider: provider, Kind: Transient, Err: err}
}

// isTimeout reports whether err is a deadline or a network timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readProviderBody reads at most maxProviderBody bytes of an answer's body.
func readProviderBody(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, maxProviderBody))
}

// withTimeout is ctx bounded by an adapter's Timeout when it is > 0 (ctx's own deadline
// applies as well); call the CancelFunc when the send is done.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}
