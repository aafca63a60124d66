'use strict'
// The native addon, from the platform package npm installs beside this one
// (an optional dependency of redis-rlock, one per platform). When it is
// missing (installed with --omit=optional, copied from another platform, an
// offline mirror without it), what to install instead of the generated
// loader's own text, which blames an npm bug and names a WebAssembly package
// never published.

const pkg = require('../package.json')

function platformName() {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  const glibc = report?.header?.glibcVersionRuntime
  return `linux-${process.arch}-${glibc ? 'gnu' : 'musl'}`
}

function load() {
  try {
    return require('./native.js')
  } catch (cause) {
    const platform = platformName()
    const wanted = `${pkg.name}-${platform}@${pkg.version}`
    const published = Object.keys(pkg.optionalDependencies ?? {}).map((p) => p.slice(pkg.name.length + 1))
    const known = published.includes(platform)
      ? `install it beside ${pkg.name}: \`npm install ${wanted}\` (or install ${pkg.name} again without --omit=optional / --no-optional)`
      : `no addon is published for ${platform}; those published are ${published.join(', ') || 'none'}`
    const err = new Error(`${pkg.name} ${pkg.version} needs its native addon for ${platform}, package ${wanted}, which is not installed: ${known}`, { cause })
    err.code = 'ERR_RLOCK_NATIVE_MISSING'
    throw err
  }
}

module.exports = load()
