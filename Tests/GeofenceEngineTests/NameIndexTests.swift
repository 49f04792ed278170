import GeofenceEngine
import GeofenceTestSupport
import Testing

/// `NameIndex` against a `Dictionary` doing the same: inserts, removals (backward shifts), moves, growth and
/// compaction, with names whose hashes are made to collide in the table (every name of a group lands on the
/// same slots) as well as ordinary ones.
@Suite struct NameIndexTests {
    /// What `FixPipeline` does with it: names in an array, the index finding their positions.
    private struct Owner {
        var names: [String] = []
        var index = NameIndex()
        var reference: [String: Int] = [:]
        let hashOf: (String) -> Int

        func find(_ name: String) -> Int? { index.find(hash: hashOf(name)) { names[$0] == name } }

        mutating func add(_ name: String) {
            index.insert(hash: hashOf(name), position: names.count)
            reference[name] = names.count
            names.append(name)
        }

        /// Removes as the pipeline evicts: the last name moves into the hole.
        mutating func remove(_ name: String) {
            guard let position = find(name) else { return }
            index.remove(hash: hashOf(name), position: position)
            let last = names.count - 1
            if position != last {
                names.swapAt(position, last)
                index.move(hash: hashOf(names[position]), from: last, to: position)
                reference[names[position]] = position
            }
            names.removeLast()
            reference[name] = nil
        }

        func check(_ pool: [String]) {
            #expect(index.count == reference.count)
            for name in pool {
                #expect(find(name) == reference[name], "\(name)")
            }
        }
    }

    @Test("100,000 random inserts, removals and moves: the positions a Dictionary keeps, names colliding or not")
    func againstADictionary() {
        for colliding in [false, true] {
            var random = SeededGenerator(seed: colliding ? 5 : 4)
            // Colliding: 16 groups of names sharing one hash each (the same top 32 bits: the same home slot).
            let hashOf: (String) -> Int =
                colliding ? { Int(bitPattern: UInt(truncatingIfNeeded: $0.utf8.count % 16) << 40) } : { $0.hashValue }
            var owner = Owner(hashOf: hashOf)
            let pool = (0..<3_000).map { "veh-\($0)-" + String(repeating: "x", count: $0 % 17) }
            for step in 0..<100_000 {
                let name = pool[Int.random(in: 0..<pool.count, using: &random)]
                if owner.reference[name] == nil {
                    if Int.random(in: 0..<3, using: &random) > 0 { owner.add(name) }
                } else {
                    if Int.random(in: 0..<2, using: &random) == 0 { owner.remove(name) }
                }
                #expect(owner.find(name) == owner.reference[name], "step \(step): \(name)")
                if step % 20_000 == 19_999 {
                    owner.check(pool)
                    owner.index.compact()
                    owner.check(pool)
                }
            }
            // Everything out, then back in: empty slots everywhere, then growth from the smallest table.
            for name in pool { owner.remove(name) }
            owner.index.compact()
            owner.check(pool)
            #expect(owner.index.count == 0)
            for name in pool.prefix(2_000) { owner.add(name) }
            owner.check(pool)
        }
    }
}
