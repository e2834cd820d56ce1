// Package resume runs held streams' steps (see package proxy's hijack.go): a
// stream's start, and each Wake of its parked upstream connection
// (rawio.Conn.Park). A step is an event or a few: a read from the upstream, a
// write to the client, microseconds. The steps wait in a run queue, and a few
// resumers take them one after another, on stacks already grown for them, as
// an event loop would: a burst of a thousand events is not a thousand
// goroutines started, each growing its stack from the smallest.
//
// A step can block, though: the client's socket may not take its write, for
// up to timeouts.client_write_idle. So the resumers running are bounded only
// softly (the pool's soft bound): while steps wait and every resumer is
// running, a watchdog checks every Stall that the queue moved, and starts one
// more resumer when it did not. Steps that the running ones leave waiting
// wait Stall at most for each one blocked.
package resume
