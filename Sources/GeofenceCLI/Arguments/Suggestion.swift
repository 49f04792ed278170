/// Finds the name a user probably meant, for "did you mean …?" hints.
package enum Suggestion {
    /// The candidate closest to `input` by edit distance (a swap of neighbours counts as one
    /// edit), or one that `input` is a prefix of; nil when nothing is close enough to be a
    /// likely typo. Leading dashes are ignored when comparing.
    package static func closest(to input: String, among candidates: [String]) -> String? {
        let typed = Array(input.drop(while: { $0 == "-" }))
        guard !typed.isEmpty else { return nil }
        var best: (name: String, score: Int)?
        for candidate in candidates {
            let name = Array(candidate.drop(while: { $0 == "-" }))
            var score = distance(typed, name)
            let allowed = max(typed.count, name.count) <= 4 ? 1 : 2
            if typed.count >= 2 && name.starts(with: typed) { score = min(score, 1) }
            if score <= allowed && score < (best?.score ?? Int.max) {
                best = (candidate, score)
            }
        }
        return best?.name
    }

    /// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of
    /// adjacent characters each cost one.
    package static func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previous2[j - 2] + 1)
                }
            }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[b.count]
    }
}
