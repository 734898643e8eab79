import Glibc

/// Walks the lines of some bytes (each with its newline; a last line may lack one), from
/// the start or from the end, without copying them: the diff's way through a window too
/// large to split.
struct LineCursor {
    private let bytes: ArraySlice<UInt8>
    private var front: Int
    private var back: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        front = bytes.startIndex
        back = bytes.endIndex
    }

    /// The next line from the front, or nil at the end.
    mutating func next() -> Range<Int>? {
        guard front < back else { return nil }
        let start = front
        let length = back - start
        let offset = start - bytes.startIndex
        let found: Int? = bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            let from = UnsafeRawPointer(base + offset)
            guard let hit = memchr(from, 0x0A, length) else { return nil }
            return start + (UnsafeRawPointer(hit) - from)
        }
        front = found.map { $0 + 1 } ?? back
        return start..<front
    }

    /// The next line from the back, or nil at the start.
    mutating func previous() -> Range<Int>? {
        guard back > front else { return nil }
        let end = back
        var start = end - 1  // the line's own newline, if it has one, is at end - 1
        while start > front, bytes[start - 1] != 0x0A { start -= 1 }
        back = start
        return start..<end
    }
}
