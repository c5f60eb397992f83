#if SwiftConfiguration
    import Configuration
    import Lockbox

    extension LockboxConfiguration {
        /// Reads a configuration from swift-configuration's `ConfigReader`, over `defaults`.
        ///
        /// Scope the reader to `lockbox` (`reader.scoped(to: "lockbox")`), so that with an
        /// `EnvironmentVariablesProvider` the keys below are the `LOCKBOX_*` variables, and in a JSON
        /// file (`FileProvider<JSONSnapshot>`) or a YAML file (`FileProvider<YAMLSnapshot>`) they sit
        /// under a `lockbox` key. YAML is swift-configuration's `YAML` trait (it pulls in jpsim/Yams),
        /// off unless your manifest enables it, or Lockbox's `YAML` trait (which the package's own
        /// tests build with, reading environment variables, JSON and YAML):
        ///
        /// | key | environment variable | value |
        /// |---|---|---|
        /// | `store` | `LOCKBOX_STORE` | the store: `auto`, `file` or `secret-service` (old name: `backend`, `LOCKBOX_BACKEND`; `store` wins, as in the CLI) |
        /// | `profile` | `LOCKBOX_PROFILE` | the profile a store choice is recorded under |
        /// | `vault` | `LOCKBOX_VAULT` | the file vault |
        /// | `settingsPath` | `LOCKBOX_SETTINGS_PATH` | the settings file (store choices) |
        /// | `keyFile` | `LOCKBOX_KEY_FILE` | the key file that opens the vault |
        /// | `keyFileAccess` | `LOCKBOX_KEY_FILE_ACCESS` | `owner-only` or `read-only-mount` (``KeyFileAccess``) |
        /// | `lockDirectory` | `LOCKBOX_LOCK_DIRECTORY` | the item locks' folder |
        /// | `pinPreset` | `LOCKBOX_PIN_PRESET` | `desktop` or `server` (``PinPreset``) |
        /// | `hashMemoryBudgetMebibytes` | `LOCKBOX_HASH_MEMORY_BUDGET_MEBIBYTES` | MiB all PIN hashes may take at once, 1 to 1048576 |
        /// | `concurrentHashes` | `LOCKBOX_CONCURRENT_HASHES` | PIN hashes that may run at once, 1 to 1024 (default: one less than the cores) |
        /// | `blockingThreads` | `LOCKBOX_BLOCKING_THREADS` | threads of the blocking executor, 1 to 1024 |
        /// | `blockingThreadNiceness` | `LOCKBOX_BLOCKING_THREAD_NICENESS` | how much lower the executor's threads run, 0 to 19 |
        /// | `tpm.tcti` | `LOCKBOX_TPM_TCTI` | the TCTI that reaches the TPM |
        /// | `tpm.timeout` | `LOCKBOX_TPM_TIMEOUT` | seconds one TPM operation may take, above 0 and at most 3600 (e.g. `5`, `0.5`) |
        ///
        /// `LOCKBOX_STORE`, `LOCKBOX_VAULT`, `LOCKBOX_KEY_FILE`, `LOCKBOX_PROFILE`, `LOCKBOX_TPM_TCTI` and `LOCKBOX_TPM_TIMEOUT`
        /// mean what they mean to the `lockbox` CLI, so a service and the CLI run beside it agree.
        ///
        /// A key that is absent keeps the value of `defaults`. A value that is present but not valid
        /// — an unknown store or preset, a number out of range or not a number, an empty path — throws
        /// ``LockboxError/invalidArgument(_:)`` naming the key, never a silent fallback to the default.
        /// None of these values is secret (the key file's *path* is configured, never its contents).
        public init(config: ConfigReader, defaults: LockboxConfiguration) throws {
            self = defaults
            // `store`, then its old name `backend`: the order the CLI reads $LOCKBOX_STORE and $LOCKBOX_BACKEND.
            if let store = try Self.choice(config, "store", StoreRequest.self) ?? Self.choice(config, "backend", StoreRequest.self) {
                self.store = store
            }
            if let profile = try Self.text(config, "profile") { self.profile = profile }
            if let path = try Self.text(config, "vault") { vaultPath = FilePath(path) }
            if let path = try Self.text(config, "settingsPath") { settingsPath = FilePath(path) }
            if let path = try Self.text(config, "keyFile") { keyFile = FilePath(path) }
            if let access = try Self.choice(config, "keyFileAccess", KeyFileAccess.self) { keyFileAccess = access }
            if let path = try Self.text(config, "lockDirectory") { lockDirectory = FilePath(path) }
            if let preset = try Self.text(config, "pinPreset") {
                switch preset {
                case "desktop": pinPreset = .desktop
                case "server": pinPreset = .server
                default: throw Self.invalid("pinPreset", preset, expected: "desktop or server")
                }
            }
            if let mebibytes = try Self.number(config, "hashMemoryBudgetMebibytes", in: 1...(1 << 20)) {
                hashMemoryBudgetBytes = UInt64(mebibytes) << 20
            }
            if let hashes = try Self.number(config, "concurrentHashes", in: 1...1024) { concurrentHashes = hashes }
            if let threads = try Self.number(config, "blockingThreads", in: 1...1024) { blockingThreads = threads }
            if let niceness = try Self.number(config, "blockingThreadNiceness", in: 0...19) { blockingThreadNiceness = niceness }
            if let tcti = try Self.text(config, "tpm.tcti") { tpmTCTI = tcti }
            if let timeout = try Self.text(config, "tpm.timeout") {
                guard let seconds = Double(timeout), seconds > 0, seconds <= 3600 else {
                    throw Self.invalid("tpm.timeout", timeout, expected: "a number of seconds above 0 and at most 3600")
                }
                tpmTimeoutSeconds = seconds
            }
            try validate()
        }

        /// The value at `key` as text, whatever type the provider holds it as; `nil` when absent.
        /// An empty string counts as a mistake (an unset variable exported empty), not as absent.
        private static func text(_ config: ConfigReader, _ key: String) throws -> String? {
            let configKey = ConfigKey(key.split(separator: ".").map(String.init))
            let value =
                config.string(forKey: configKey)
                ?? config.int(forKey: configKey).map(String.init)
                ?? config.bool(forKey: configKey).map(String.init)
            if let value, value.isEmpty { throw invalid(key, value, expected: "a value (it is empty)") }
            return value
        }

        private static func choice<Choice: RawRepresentable & CaseIterable>(
            _ config: ConfigReader, _ key: String, _ type: Choice.Type
        ) throws -> Choice? where Choice.RawValue == String {
            guard let value = try text(config, key) else { return nil }
            guard let choice = Choice(rawValue: value) else {
                throw invalid(key, value, expected: Choice.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return choice
        }

        private static func number(_ config: ConfigReader, _ key: String, in range: ClosedRange<Int>) throws -> Int? {
            guard let value = try text(config, key) else { return nil }
            guard let number = Int(value), range.contains(number) else {
                throw invalid(key, value, expected: "a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }

        private static func invalid(_ key: String, _ value: String, expected: String) -> LockboxError {
            let shown = value.count > 64 ? String(value.prefix(64)) + "…" : value
            return LockboxError.invalidArgument("the configuration value `\(key)` is '\(shown)'; expected \(expected)")
        }
    }
#endif
