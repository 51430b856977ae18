package service

import (
	"context"
	"sync"
)

// lane is a bounded pool of workers with a bounded queue: at most workers jobs of the
// lane run at once, and up to queueFactor*workers wait. Lanes share nothing, so a
// saturated bulk lane never delays a transactional job.
type lane struct {
	jobs chan func()
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// queueFactor sizes a lane's queue per worker.
const queueFactor = 64

func newLane(workers int) *lane {
	l := &lane{jobs: make(chan func(), workers*queueFactor), quit: make(chan struct{})}
	l.wg.Add(workers)
	for range workers {
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.quit:
					return
				case job := <-l.jobs:
					job()
				}
			}
		}()
	}
	return l
}

// submit queues job, waiting for room until ctx ends when wait is true; false when it
// was not queued (queue full without wait, ctx ended, or the lane stopped). A job not
// queued is left to its request's recovery task.
func (l *lane) submit(ctx context.Context, job func(), wait bool) bool {
	if !wait {
		select {
		case <-l.quit:
			return false
		case l.jobs <- job:
			return true
		default:
			return false
		}
	}
	select {
	case <-l.quit:
		return false
	case <-ctx.Done():
		return false
	case l.jobs <- job:
		return true
	}
}

// stop ends the workers after their current job; queued jobs are dropped (their
// requests' recovery tasks run them).
func (l *lane) stop() {
	l.once.Do(func() { close(l.quit) })
	l.wg.Wait()
}
