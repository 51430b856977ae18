package service

import (
	"context"
	"sync"
)

// lane is a bounded pool: at most workers jobs of the lane run at once, and up to
// queueFactor*workers more wait for a worker. Lanes share nothing, so a saturated bulk
// lane never delays a transactional job. A lane holds no goroutine while idle.
type lane struct {
	run   chan struct{} // a slot per running job
	queue chan struct{} // a slot per job queued or running
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// queueFactor sizes a lane's queue per worker.
const queueFactor = 64

func newLane(workers int) *lane {
	return &lane{run: make(chan struct{}, workers), queue: make(chan struct{}, workers*(queueFactor+1)),
		quit: make(chan struct{})}
}

// submit queues job, waiting for room until ctx ends when wait is true; false when it
// was not queued (queue full without wait, ctx ended, or the lane stopped). A job not
// queued, or dropped by stop before it ran, is left to its request's recovery task.
func (l *lane) submit(ctx context.Context, job func(), wait bool, dropped func()) bool {
	select {
	case <-l.quit:
		return false
	default:
	}
	if wait {
		select {
		case <-l.quit:
			return false
		case <-ctx.Done():
			return false
		case l.queue <- struct{}{}:
		}
	} else {
		select {
		case l.queue <- struct{}{}:
		default:
			return false
		}
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() { <-l.queue }()
		select {
		case <-l.quit:
			dropped()
			return
		case l.run <- struct{}{}:
		}
		defer func() { <-l.run }()
		job()
	}()
	return true
}

// stop drops the jobs waiting for a worker and waits for the running ones.
func (l *lane) stop() {
	l.once.Do(func() { close(l.quit) })
	l.wg.Wait()
}
