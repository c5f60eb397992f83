import FoundationEssentials

/// What to do when the destination already holds a different item at the same address.
public enum ConflictPolicy: String, Sendable, CaseIterable {
    /// Leave the destination's item; report the conflict.
    case skip
    /// Replace the destination's item.
    case overwrite
    /// Keep both: the incoming item goes under `ACCOUNT (imported N)`.
    case keepBoth = "keep-both"
}

/// What a ``Transfer`` did, item by item.
public struct TransferReport: Sendable, Equatable {
    /// Copied (and verified by reading back).
    public var copied: [ItemKey] = []
    /// Already in the destination, identical: nothing to do (a re-run after an interruption).
    public var alreadyPresent: [ItemKey] = []
    /// Different in the destination and left alone (`skip`).
    public var conflictsSkipped: [ItemKey] = []
    /// Different in the destination and replaced (`overwrite`).
    public var overwritten: [ItemKey] = []
    /// Different in the destination and kept both: original address → new address.
    public var keptBoth: [ItemKey: ItemKey] = [:]
    /// Removed from the source after a verified copy (`move`).
    public var removedFromSource: [ItemKey] = []
}

/// Copies items between stores — migration between the file vault and the Secret Service,
/// exports to and imports from backup vaults — in memory only (no plaintext temp file), verifying
/// each copy by reading it back before anything is removed. Items go to the destination in
/// batches of 500 through ``SecretStore/set(_:)`` (one file rewrite per batch for a file vault).
/// Safe to re-run: items already copied are recognised and left alone.
public enum Transfer {
    /// Copies the items of `service` (or all items) from `source` to `destination`.
    /// - Parameters:
    ///   - source: the store to read items from.
    ///   - destination: the store to copy them into.
    ///   - service: copy only this service's items; `nil` copies every item.
    ///   - onConflict: what to do when `destination` holds a different item at the same address.
    ///   - move: remove the source items once their copies are verified (one removal per batch).
    ///   - progress: called with (done, total) for every item, as each batch of 500 finishes.
    /// - Returns: which items were copied, already present, skipped as conflicts, overwritten, kept
    ///   alongside (``ConflictPolicy/keepBoth``) or removed from the source.
    /// - Throws: whatever either store throws, or ``LockboxError/invalidArgument(_:)`` when a copy
    ///   does not read back identically (that item's source is left as it was) or no free
    ///   `(imported N)` address is left for ``ConflictPolicy/keepBoth``.
    @available(
        *, noasync,
        message:
            "blocks the calling thread: in an async function or closure write try await to get the async overload; top-level code always picks this one, so call it from a function there"
    )
    public static func run(
        from source: any SecretStore, to destination: any SecretStore, service: String? = nil,
        onConflict: ConflictPolicy = .skip, move: Bool = false, progress: ((Int, Int) -> Void)? = nil
    ) throws -> TransferReport {
        // The implementation runs on this thread (CallingThread), so the caller's closure is
        // only ever called here, as a plain loop would call it.
        nonisolated(unsafe) let progress = progress
        return try CallingThread.run {
            try await run(
                from: InlineSecretStore(store: source), to: InlineSecretStore(store: destination), service: service,
                onConflict: onConflict, move: move, report: { progress?($0, $1) })
        }
    }

    /// The one implementation, over async stores (the blocking ``run(from:to:service:onConflict:move:progress:)``
    /// runs it on the caller's thread over the stores called inline).
    private static func run(
        from source: any AsyncSecretStore, to destination: any AsyncSecretStore, service: String?,
        onConflict: ConflictPolicy, move: Bool, report progress: @Sendable (Int, Int) -> Void
    ) async throws -> TransferReport {
        var report = TransferReport()
        let items = try await source.list(service: service)
        // A keep-both copy never takes an address a source item will be copied to.
        let sourceKeys = Set(items.map(\.key))
        var done = 0
        // In batches: each batch is one `set(_:)` on the destination (one file rewrite for the
        // file vault), then every copy in it is read back before any source item is removed.
        var start = 0
        while start < items.count {
            let batch = items[start..<min(start + batchSize, items.count)]
            start += batch.count
            var writes: [(write: ItemWrite, source: ItemKey)] = []
            var remove: [ItemKey] = []  // with `move`: source items to remove once all is verified
            for metadata in batch {
                guard let item = try await source.item(metadata.key) else { continue }  // removed meanwhile
                var target = metadata.key
                if let existing = try await destination.item(target) {
                    if same(existing, item) {
                        report.alreadyPresent.append(target)
                        if move { remove.append(metadata.key) }
                        continue
                    }
                    switch onConflict {
                    case .skip:
                        report.conflictsSkipped.append(target)
                        continue
                    case .overwrite:
                        report.overwritten.append(target)
                    case .keepBoth:
                        target = try await freeAddress(for: target, in: destination) { sourceKeys.contains($0) }
                        report.keptBoth[metadata.key] = target
                    }
                } else {
                    report.copied.append(target)
                }
                // The expiry and the bookkeeping go along: a previous version stays one, bound to its item.
                var options = ItemOptions(
                    kind: metadata.kind, label: metadata.label, attributes: metadata.attributes, access: metadata.access,
                    expires: metadata.expires)
                options.reserved = metadata.reserved
                writes.append((ItemWrite(item.secret, for: target, options: options), metadata.key))
            }
            try await destination.set(writes.map(\.write))
            for (write, sourceKey) in writes {
                guard let written = try await destination.item(write.key), written.secret == write.secret,
                    written.metadata.kind == write.options.kind, written.metadata.access == write.options.access
                else {
                    throw LockboxError.invalidArgument(
                        "the copy of '\(sourceKey.account)' on '\(sourceKey.service)' did not read back identically; the source was left as it was"
                    )
                }
                if move { remove.append(sourceKey) }
            }
            // One removal per batch (one rewrite of a file vault), after every copy in it verified.
            report.removedFromSource += try await source.delete(remove)
            for _ in batch {
                done += 1
                progress(done, items.count)
            }
        }
        return report
    }

    /// How many items go into one destination write.
    static let batchSize = 500

    private static func same(_ a: StoredItem, _ b: StoredItem) -> Bool {
        a.secret == b.secret && a.metadata.kind == b.metadata.kind && a.metadata.label == b.metadata.label
            && a.metadata.attributes == b.metadata.attributes && a.metadata.access == b.metadata.access
    }

    private static func freeAddress(
        for key: ItemKey, in store: any AsyncSecretStore, excluding isTaken: (ItemKey) -> Bool
    ) async throws -> ItemKey {
        for number in 1...1000 {
            let candidate = ItemKey(service: key.service, account: "\(key.account) (imported \(number))")
            if !isTaken(candidate), try await store.metadata(candidate) == nil { return candidate }
        }
        throw LockboxError.invalidArgument("no free name for another copy of '\(key.account)' on '\(key.service)'")
    }
}

extension Transfer {
    /// ``run(from:to:service:onConflict:move:progress:)`` awaited, the stores' calls run on
    /// `executor`; `progress` is called from the awaiting task.
    public static func run(
        from source: any SecretStore, to destination: any SecretStore, service: String? = nil,
        onConflict: ConflictPolicy = .skip, move: Bool = false, executor: BlockingExecutor = .shared,
        progress: (@Sendable (Int, Int) -> Void)? = nil
    ) async throws -> TransferReport {
        try await run(
            from: source.offloaded(to: executor), to: destination.offloaded(to: executor), service: service,
            onConflict: onConflict, move: move, report: { progress?($0, $1) })
    }

    /// ``run(from:to:service:onConflict:move:progress:)`` between async stores (one may be a
    /// blocking store through ``SecretStore/offloaded(to:)``), awaited without blocking a thread.
    public static func run(
        from source: any AsyncSecretStore, to destination: any AsyncSecretStore, service: String? = nil,
        onConflict: ConflictPolicy = .skip, move: Bool = false, progress: (@Sendable (Int, Int) -> Void)? = nil
    ) async throws -> TransferReport {
        try await run(from: source, to: destination, service: service, onConflict: onConflict, move: move, report: { progress?($0, $1) })
    }
}
