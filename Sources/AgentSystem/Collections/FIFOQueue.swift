/// A first-in, first-out queue over an array. A taken element's slot is emptied at once, so
/// what the element holds (a job's closure and its captures) is freed when it is taken, not
/// at the next compaction; the taken prefix is dropped when the queue runs empty, or once it
/// is over 64 slots and half the array.
///
/// Bounded by its callers: it holds what they append.
public struct FIFOQueue<Element> {
    private var slots: [Element?] = []
    private var head = 0

    public init() {}

    /// Elements waiting.
    public var count: Int { slots.count - head }

    public mutating func append(_ element: Element) {
        slots.append(element)
    }

    /// The first element, taken out; nil when the queue is empty.
    public mutating func popFirst() -> Element? {
        guard head < slots.count else { return nil }
        let element = slots[head]
        slots[head] = nil
        head += 1
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64, head * 2 > slots.count {
            slots.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Whether a waiting element satisfies `predicate`.
    public func contains(where predicate: (Element) -> Bool) -> Bool {
        slots[head...].contains { $0.map(predicate) ?? false }
    }
}
