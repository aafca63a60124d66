'use strict'
// Owners. Outside any `using()` the owner is the handle (a Lock, a
// RwLock, a Semaphore): Node runs every flow on one thread, so nothing else
// tells two concurrent requests apart. A `using()` scope is its lock's
// owner, carried by AsyncLocalStorage into everything its callback awaits or
// starts: a lock of the same kind, name and client made there belongs to the
// scope, so it nests instead of waiting on itself. `client.using()` makes an
// owner for its scope, as a new handle would. Units are serial numbers,
// never reused.

const { AsyncLocalStorage } = require('node:async_hooks')

/** The scopes the calling flow runs in, innermost first: `{ outer, id, open }`. */
const scopes = new AsyncLocalStorage()
let serial = 0

/**
 * Which lock a handle is and whom for: `{ client, kind, name, owner }`, its
 * kind 'lock', 'rwLock' or 'semaphore' (three locks under one name). The
 * owner is the open scope's holding that lock, else a new one.
 */
function identity(client, kind, name) {
  for (let scope = scopes.getStore(); scope !== undefined; scope = scope.outer) {
    const { id } = scope
    if (scope.open && id.client === client && id.kind === kind && id.name === name) return id
  }
  serial += 1
  return { client, kind, name, owner: `n${serial}` }
}

// The method by which a handle runs a callback as its own scope, its
// arguments already checked (`client.using()` checks them itself): a symbol,
// so that it is no part of the public API.
const scoped = Symbol('scoped')

module.exports = { scopes, identity, scoped }
