// Package admin owns the admin API of the callers' keys, /admin/v1/keys on the admin
// listener: its HTTP handlers and JSON shapes, the admin tokens that authenticate it, the
// validation of what it is sent (every problem named by its field's path, nothing applied
// until all is valid), and the audit of every change (a log line and a metric, never a
// secret).
//
// A change is written to the store first, as a conditional write of the record read (a
// change made meanwhile by another node is read again and applied on top), then this
// node's snapshot is refreshed before the answer; the other nodes follow through the
// store's announcements (proxy/keys).
//
// It does not own the key records' type, the snapshot or its synchronisation (proxy/keys),
// their storage (store) or the other endpoints of the admin listener (proxy).
package admin
