//go:build race

package ddbfault_test

// The race detector slows the gateway (and DynamoDB Local's neighbours) several times
// over; the live-badge bound scales with it.
func init() { badgeWithin *= 5 }
