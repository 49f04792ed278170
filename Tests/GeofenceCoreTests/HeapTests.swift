import GeofenceCore
import Testing

@Suite("heap")
struct HeapTests {
    @Test("pushes and pops in any mix come out in order, as a sort would give them")
    func ordersLikeASort() {
        var generator = SystemRandomNumberGenerator()
        var heap = Heap<Int>(by: <)
        var model: [Int] = []
        for _ in 0..<2_000 {
            if Bool.random(using: &generator) || model.isEmpty {
                let value = Int.random(in: 0..<500, using: &generator)
                heap.push(value)
                model.append(value)
            } else {
                model.sort()
                #expect(heap.popFirst() == model.removeFirst())
            }
            #expect(heap.first == model.min())
            #expect(heap.count == model.count)
        }
        model.sort()
        var drained: [Int] = []
        while let value = heap.popFirst() { drained.append(value) }
        #expect(drained == model)
        #expect(heap.isEmpty && heap.popFirst() == nil && heap.first == nil)
    }

    @Test("built from unordered elements; ties go as the caller's order breaks them")
    func buildsAndBreaksTies() {
        struct Item: Sendable, Equatable {
            var at: Int
            var seq: Int
        }
        let items = (0..<100).map { Item(at: ($0 * 37) % 10, seq: $0) }
        var heap = Heap(items.shuffled()) { a, b in a.at < b.at || (a.at == b.at && a.seq < b.seq) }
        var out: [Item] = []
        while let item = heap.popFirst() { out.append(item) }
        #expect(out == items.sorted { ($0.at, $0.seq) < ($1.at, $1.seq) })
    }
}
