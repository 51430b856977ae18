package relay

// Readers returns how many shard readers r runs now: the tests count the goroutines that
// wait on r's clock between two reads.
func Readers(r *Relay) int { return int(r.readers.Load()) }

// Holding reports whether r holds the relay's lease (by its clock).
func Holding(r *Relay) bool { return r.lease.Held() }
