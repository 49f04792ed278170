extension Schema {
    /// Hooks and their deliveries.
    static func registerHooks(_ m: inout DatabaseMigrator) {
    }
}
