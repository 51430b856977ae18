package main

import (
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts a CPU profile (cpu != "") and writes an allocation profile
// baseline (mem != "": mem+".base"); the returned func stops the CPU profile and writes
// the allocation profile, so that `go tool pprof -base mem.base mem` shows only what was
// allocated in between. The profiles cover this process: the gateway, not the load
// generator child and not the engine.
func startProfiles(cpu, mem string) (stop func() error, err error) {
	var cpuFile *os.File
	if cpu != "" {
		if cpuFile, err = os.Create(cpu); err != nil {
			return nil, err
		}
		if err = pprof.StartCPUProfile(cpuFile); err != nil {
			_ = cpuFile.Close()
			return nil, err
		}
	}
	writeHeap := func(name string) error {
		runtime.GC() // the allocation profile is as of the last GC
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if mem != "" {
		if err := writeHeap(mem + ".base"); err != nil {
			return nil, err
		}
	}
	return func() error {
		var errs []error
		if cpuFile != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpuFile.Close())
		}
		if mem != "" {
			errs = append(errs, writeHeap(mem))
		}
		return errors.Join(errs...)
	}, nil
}

// writeProfile writes the named runtime/pprof profile to file (debug as for
// pprof.Profile.WriteTo: 0 the binary format).
func writeProfile(name, file string, debug int) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup(name).WriteTo(f, debug), f.Close())
}
