// ESM entry: the same module instance as the CommonJS entry, so classes and
// `instanceof` checks agree whichever way the package is loaded. Node finds
// the named exports in index.js's `module.exports = { … }`.
export * from './index.js'
export { default } from './index.js'
