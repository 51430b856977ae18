package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The shapes the scenarios share: something run in the background until the scenario
// stops it, a poll until a condition holds or something stops moving, a segment's
// members, a table of a scenario's own.

// background runs run on a context of its own until the returned stop, which cancels it,
// waits for it to return and then calls release (nil: nothing) on a context that outlives
// the scenario's for at most 10s (a scheduler's or relay's lease release).
func background(ctx context.Context, run func(context.Context) error, release func(context.Context) error) (stop func() error) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(rctx) }()
	return func() error {
		cancel()
		err := <-done
		if release != nil {
			lctx, c := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer c()
			_ = release(lctx)
		}
		return err
	}
}

// pollInterval is how often waitUntil and untilQuiet look.
const pollInterval = 100 * time.Millisecond

// waitUntil polls ok until it holds, for at most limit; past it, the error says what was
// awaited and what ok last saw (its status).
func waitUntil(ctx context.Context, limit time.Duration, what string, ok func() (done bool, status string, err error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, status, err := ok()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s (%s)", what, limit, status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// waitHeld waits (at most limit) until a scheduler holds want shards (held counts them).
func waitHeld(ctx context.Context, limit time.Duration, what string, want int, held func() int) error {
	return waitUntil(ctx, limit, what+" holds every shard", func() (bool, string, error) {
		n := held()
		return n >= want, fmt.Sprintf("%d of %d", n, want), nil
	})
}

// untilQuiet polls count until it has not changed for quiet, for at most limit (0: no
// limit), and returns how long that took.
func untilQuiet(ctx context.Context, quiet, limit time.Duration, what string, count func() (int, error)) (time.Duration, error) {
	t0 := time.Now()
	last, since := -1, time.Now()
	for time.Since(since) < quiet {
		n, err := count()
		if err != nil {
			return time.Since(t0), err
		}
		if n != last {
			last, since = n, time.Now()
		}
		if limit > 0 && time.Since(t0) > limit {
			return time.Since(t0), fmt.Errorf("%s was still busy after %s", what, limit)
		}
		select {
		case <-ctx.Done():
			return time.Since(t0), ctx.Err()
		case <-time.After(pollInterval):
		}
	}
	return time.Since(t0), nil
}

// segmentMembers are n users named prefix-0000000 on.
func segmentMembers(prefix string, n int) []string {
	members := make([]string, n)
	for i := range members {
		members[i] = fmt.Sprintf("%s-%07d", prefix, i)
	}
	return members
}

// parseSpreads reads a -*-spread flag: comma-separated durations within one minute.
func parseSpreads(flag, value string) ([]time.Duration, error) {
	var spreads []time.Duration
	for _, f := range strings.Split(value, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 || d > time.Minute {
			return nil, fmt.Errorf("-%s %q: each must be a duration within 0..1m", flag, f)
		}
		spreads = append(spreads, d)
	}
	return spreads, nil
}

// dropTable deletes table (a scenario's own) on a context that outlives the scenario's
// for at most a minute.
func (b *harness) dropTable(ctx context.Context, table string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_, _ = b.eng.db.DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
}
