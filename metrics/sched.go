package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// schedLagBuckets are the scheduler's lag buckets, in seconds: 50 ms (a task run within
// one poll) to 10 minutes (a long outage caught up).
var schedLagBuckets = []float64{.05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300, 600}

// Sched holds the durable scheduler's metrics (package sched reports through
// sched.Options.Observe; server.go connects the two). A nil *Sched records nothing.
type Sched struct {
	tasks *prometheus.CounterVec   // kind, outcome
	lag   *prometheus.HistogramVec // kind
}

// NewSched registers the scheduler's metrics on r and returns them; call it once per
// Registry. A nil r gives a nil *Sched.
func NewSched(r *Registry) *Sched {
	if r == nil {
		return nil
	}
	m := &Sched{
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "sched_tasks_total",
			Help: "Runs of scheduled tasks, by task kind (set by the code: snooze wake-up, expiry...) and outcome: " +
				"done (the handler succeeded, the task was deleted), retried (it failed and was rescheduled with backoff), " +
				"dropped (it failed the last allowed time and was deleted).",
		}, []string{"kind", "outcome"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "sched_lag_seconds",
			Help:    "Time from a scheduled task's due time to the end of its handler's run, by task kind, in seconds.",
			Buckets: schedLagBuckets,
		}, []string{"kind"}),
	}
	r.reg.MustRegister(m.tasks, m.lag)
	return m
}

// Observe records one run of a task of kind with its outcome and lag (the signature of
// sched.Options.Observe, with the outcome as a string).
func (m *Sched) Observe(kind, outcome string, lag time.Duration) {
	if m == nil {
		return
	}
	m.tasks.WithLabelValues(kind, outcome).Inc()
	m.lag.WithLabelValues(kind).Observe(lag.Seconds())
}
