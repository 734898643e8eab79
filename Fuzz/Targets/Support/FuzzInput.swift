/// libFuzzer's bytes read as a structured case: numbers, lengths and byte strings taken
/// from the front, so that mutating the input mutates the case. Reading past the end gives
/// zeros and empty strings, never a trap.
public struct FuzzInput {
    public let bytes: [UInt8]
    public private(set) var index = 0

    public init(_ data: UnsafePointer<UInt8>?, _ count: Int) {
        bytes = count > 0 && data != nil ? Array(UnsafeBufferPointer(start: data, count: count)) : []
    }

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Bytes not read yet.
    public var remaining: Int { bytes.count - index }
    public var isEmpty: Bool { remaining == 0 }

    /// The next byte, or 0.
    public mutating func byte() -> UInt8 {
        guard index < bytes.count else { return 0 }
        defer { index += 1 }
        return bytes[index]
    }

    public mutating func bool() -> Bool { byte() & 1 == 1 }

    /// A little-endian number of `width` bytes (at most 8).
    public mutating func uint(_ width: Int) -> UInt64 {
        var value: UInt64 = 0
        for shift in 0..<min(width, 8) { value |= UInt64(byte()) << UInt64(8 * shift) }
        return value
    }

    /// A number in `range`, from two bytes.
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = UInt64(range.upperBound - range.lowerBound) + 1
        return range.lowerBound + Int(uint(2) % span)
    }

    /// The next `count` bytes (fewer at the end).
    public mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, index + max(0, count))
        defer { index = end }
        return Array(bytes[index..<end])
    }

    /// A byte string whose length (at most `maxLength`) comes from the input first.
    public mutating func data(maxLength: Int = 255) -> [UInt8] {
        take(Int(uint(maxLength > 255 ? 2 : 1)) % (maxLength + 1))
    }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] {
        take(remaining)
    }

    /// `bytes` split into chunks whose sizes (1...`maxChunk`) come from the input, for
    /// decoders that must not care where a stream is split.
    public mutating func chunks(of bytes: [UInt8], maxChunk: Int = 64) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var start = 0
        while start < bytes.count {
            let size = 1 + Int(byte()) % max(1, maxChunk)
            let end = min(bytes.count, start + size)
            out.append(Array(bytes[start..<end]))
            start = end
        }
        return out
    }
}

/// Fails the run (libFuzzer saves the input as a crash) when an invariant does not hold.
public func require(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
) {
    if !condition() { fatalError("invariant violated: \(message())", file: file, line: line) }
}

/// A stream decoder driven the way the agent drives one: each chunk fed in turn, and after
/// each every item it can give pulled out, until the first error. Returns the items and
/// that error, for the check "the same items and error however the stream is split".
public func decodeSplit<Item, Failure: Error>(
    _ chunks: [[UInt8]], feed: ([UInt8]) -> Void, next: () throws(Failure) -> Item?
) -> (items: [Item], error: Failure?) {
    var items: [Item] = []
    for chunk in chunks {
        feed(chunk)
        do {
            while let item = try next() { items.append(item) }
        } catch {
            return (items, error)
        }
    }
    return (items, nil)
}
