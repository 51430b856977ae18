package channel

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"
)

// limited is a Channel behind a token bucket (see Limit).
type limited struct {
	Channel
	lim *rate.Limiter
}

// Limit returns ch limited to perSecond sends per second with bursts of up to burst
// (at least 1), through one token bucket (golang.org/x/time/rate) shared by every
// caller of the returned Channel: a Send waits for its token within ctx. When the token
// cannot come before ctx ends (it is cancelled, or its deadline is too near), Send
// returns a Transient *Error of ch's provider with Code "rate_limited" without calling
// ch. perSecond <= 0 means no limit: ch itself is returned.
func Limit(ch Channel, perSecond float64, burst int) Channel {
	if perSecond <= 0 {
		return ch
	}
	return &limited{Channel: ch, lim: rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))}
}

// Send waits for a token, then sends through the wrapped Channel.
func (l *limited) Send(ctx context.Context, m Message) (Result, error) {
	if err := l.lim.Wait(ctx); err != nil {
		return Result{}, &Error{Provider: l.Provider(), Kind: Transient, Code: "rate_limited", Err: fmt.Errorf("rate limit wait: %w", err)}
	}
	return l.Channel.Send(ctx, m)
}
