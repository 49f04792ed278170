/// A binary min-heap: the element that comes first by `precedes` is always at the front, and is taken
/// first. For the queues that wait on a time (regions' expiries, hook deliveries' next attempts).
package struct Heap<Element: Sendable>: Sendable {
    /// The elements in heap order: the first comes first; the rest are in no useful order.
    package private(set) var elements: [Element]
    /// Whether the first element comes before the second: a strict order, ties broken by the caller.
    private let precedes: @Sendable (Element, Element) -> Bool

    /// A heap of `elements` (in any order), built in linear time.
    package init(_ elements: [Element] = [], by precedes: @escaping @Sendable (Element, Element) -> Bool) {
        self.elements = elements
        self.precedes = precedes
        for i in stride(from: elements.count / 2, through: 0, by: -1) { siftDown(from: i) }
    }

    package var count: Int { elements.count }
    package var isEmpty: Bool { elements.isEmpty }
    /// How many elements the storage holds before it grows, for memory accounting.
    package var capacity: Int { elements.capacity }

    /// The element that comes first, left in.
    package var first: Element? { elements.first }

    package mutating func push(_ element: Element) {
        elements.append(element)
        var i = elements.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard precedes(elements[i], elements[parent]) else { break }
            elements.swapAt(i, parent)
            i = parent
        }
    }

    /// Takes out the element that comes first; nil when empty.
    @discardableResult
    package mutating func popFirst() -> Element? {
        guard !elements.isEmpty else { return nil }
        elements.swapAt(0, elements.count - 1)
        let first = elements.removeLast()
        siftDown(from: 0)
        return first
    }

    private mutating func siftDown(from start: Int) {
        var i = start
        while true {
            var first = i
            let left = 2 * i + 1
            if left < elements.count && precedes(elements[left], elements[first]) { first = left }
            if left + 1 < elements.count && precedes(elements[left + 1], elements[first]) { first = left + 1 }
            guard first != i else { return }
            elements.swapAt(i, first)
            i = first
        }
    }
}
