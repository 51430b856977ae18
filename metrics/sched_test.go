package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSchedMetrics(t *testing.T) {
	r := New()
	m := NewSched(r)
	m.Observe("wake", "done", 300*time.Millisecond)
	m.Observe("wake", "done", 2*time.Second)
	m.Observe("wake", "retried", time.Second)
	if got := testutil.ToFloat64(m.tasks.WithLabelValues("wake", "done")); got != 2 {
		t.Errorf("done = %v", got)
	}
	if got := testutil.ToFloat64(m.tasks.WithLabelValues("wake", "retried")); got != 1 {
		t.Errorf("retried = %v", got)
	}
	if n := testutil.CollectAndCount(r.reg, "inbox_sched_lag_seconds"); n != 1 {
		t.Errorf("lag series: %d", n)
	}
	var none *Sched
	none.Observe("wake", "done", time.Second) // a nil *Sched records nothing
	if NewSched(nil) != nil {
		t.Error("NewSched(nil) is not nil")
	}
}
