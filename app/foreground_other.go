//go:build !linux

package app

// takeForeground does nothing outside Linux (see foreground_linux.go): there, Ctrl-C of
// make run reaches make too, which then reports the interrupt.
func takeForeground() (restore func()) { return func() {} }
