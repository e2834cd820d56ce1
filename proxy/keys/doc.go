// Package keys owns the callers' keys as every node holds them: the record of a key made at
// runtime (Record), the read-only index the request path authenticates against (Snapshot:
// digest of a secret → the key's id, state, allowed models and limits), built from the
// config's keys (a read-only seed) and the store's records, and the Syncer that keeps one
// node's snapshot true to the store: it follows the store's version through announcements
// and a periodic check, reads what changed, and swaps the snapshot atomically.
//
// Nothing here writes a record on the request path: a call reads the snapshot in force
// when it started, and only the admin API (proxy/admin) changes records, in the store first.
//
// It does not own the HTTP shapes of the admin API or its validation (proxy/admin), the
// storage of records (store.KeyStore) or the rate limits' counters (proxy/ratelimit: the
// syncer hands the limits over as a config reload does).
package keys
