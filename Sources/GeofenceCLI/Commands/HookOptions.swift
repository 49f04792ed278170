import GeofenceCore
import GeofenceEngine

/// Reads `CommandTree.hookOptions` (`--hook-timeout`, ...) into a `HookConfiguration`: for `run` and
/// `replay --hooks`.
enum HookOptions {
    static func configuration(_ a: ParsedArguments, _ c: CommandContext) throws -> HookConfiguration {
        var config = HookConfiguration(environment: c.environment)
        if let timeout = try a.duration("--hook-timeout") {
            guard timeout > 0 else { throw c.invalid("--hook-timeout", "must be more than 0") }
            config.timeout = timeout
        }
        if let n = try a.integer("--hook-concurrency") {
            guard (1...256).contains(n) else {
                throw c.invalid("--hook-concurrency", "must be between 1 and 256")
            }
            config.concurrency = n
        }
        if let initial = try a.duration("--hook-retry-initial") {
            guard initial > 0 else { throw c.invalid("--hook-retry-initial", "must be more than 0") }
            config.retry.initialDelay = initial
        }
        if let max = try a.duration("--hook-retry-max") {
            guard max > 0 else { throw c.invalid("--hook-retry-max", "must be more than 0") }
            config.retry.maxDelay = max
        }
        if config.retry.maxDelay < config.retry.initialDelay {
            throw c.usage("--hook-retry-max must not be shorter than --hook-retry-initial")
        }
        if let n = try a.integer("--hook-max-attempts") {
            guard n >= 0 else { throw c.invalid("--hook-max-attempts", "must be 0 or more") }
            config.retry.maxAttempts = n == 0 ? nil : n
        }
        if let age = try a.duration("--hook-max-age") {
            config.retry.maxAge = age == 0 ? nil : age
        }
        if let n = try a.integer("--hook-output-limit") {
            guard n >= 0 else { throw c.invalid("--hook-output-limit", "must be 0 or more") }
            config.outputLimit = n
        }
        return config
    }
}
