/// Swift keeps a collection's capacity when its elements are removed: after a fleet went quiet, its
/// peak would stay. These give it back when a collection is mostly empty (one rule for every per-vehicle
/// collection the engine forgets from).
extension Array {
    /// Whether the array holds far less than it has room for.
    var isSparse: Bool { capacity > 2 * count + 1024 }
}

extension Dictionary {
    var isSparse: Bool { capacity > 2 * count + 1024 }

    /// The same entries in storage sized for them.
    var compacted: Self { Dictionary(uniqueKeysWithValues: map { ($0.key, $0.value) }) }
}
