// Paths in Lockbox's API are swift-system's `FilePath`; it is re-exported so callers need no
// `import SystemPackage` of their own (and `FilePath("/path")` or a string literal works as is).
@_exported import struct SystemPackage.FilePath
