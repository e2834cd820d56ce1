// Package spend owns the money side of calls: the prices of models (per
// model, or per deployment), the cost of a call from the usage its answer
// reported, and the budgets of keys and of named budgets that keys share
// (teams): the reservation of a call's estimated cost before it is routed,
// refused when it does not fit, and its settlement with the actual cost
// when it ends. Budgets are kept in memory on one node, or in the Redis
// Cluster that the nodes share, where one script call reserves against
// every budget of a call at once, all or none.
//
// Amounts are integers of pico-USD (1e-12 USD, config.USD): a price of up
// to 6 decimals in USD per million tokens is a whole number of pico-USD per
// token, so a cost is a sum of integer products, exact. Periods are keyed
// by their UTC start, so a new period needs no job to begin.
// docs/budgets.md says what the numbers are and what the bound is.
//
// It does not own the configuration (proxy/config), the estimate of a
// call's tokens or the answer a refused call gets (proxy writes them, in the
// family's shape), nor the Redis client (store.Redis).
package spend
