// LockboxWindows is the former name of LockboxSessionWindows (re-authentication windows in the
// kernel keyring): this module only re-exports it, so that `import LockboxWindows` and a
// dependency on the product "LockboxWindows" keep building. Deprecated: depend on the product
// "LockboxSessionWindows" and write `import LockboxSessionWindows`.
@_exported import LockboxSessionWindows
