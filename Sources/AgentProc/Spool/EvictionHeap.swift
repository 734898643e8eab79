/// Min-heap of `(seq of a spool's oldest segment, spool key)` used to find the globally
/// oldest segment in O(log n) without scanning all spools.
///
/// Entries go stale lazily (the spool's first segment changed or the spool was removed) and
/// are discarded when popped; the store rebuilds the heap when stale entries exceed
/// `2 × spools + 64`, which bounds its memory to O(number of spools).
struct EvictionHeap {
    struct Entry {
        var seq: Int64
        var key: Int
    }
    private(set) var items: [Entry] = []

    var count: Int { items.count }

    mutating func removeAll() { items.removeAll(keepingCapacity: true) }

    mutating func push(_ e: Entry) {
        items.append(e)
        var i = items.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            if items[p].seq <= items[i].seq { break }
            items.swapAt(p, i)
            i = p
        }
    }

    mutating func popMin() -> Entry? {
        guard let first = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < items.count && items[l].seq < items[m].seq { m = l }
                if r < items.count && items[r].seq < items[m].seq { m = r }
                if m == i { break }
                items.swapAt(m, i)
                i = m
            }
        }
        return first
    }
}
