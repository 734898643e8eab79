/// The bytes a frame decoder has received and not yet returned as frames (dRPC's and yamux's
/// share it): one array read from a moving start, so taking a frame copies only the frame;
/// the consumed front is dropped once it is over 64 KiB and over half the array. Its size is
/// bounded by the decoder that owns it, which refuses a frame over its limit before the
/// frame's bytes are buffered.
public struct FrameBytes: Sendable {
    /// The array and where the unread bytes start in it (read these to decode in place).
    public private(set) var storage: [UInt8] = []
    public private(set) var start = 0

    public init() {}

    /// Bytes received and not yet taken.
    public var count: Int { storage.count - start }

    /// Appends received bytes.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0 && start == storage.count {
            storage.removeAll(keepingCapacity: true)
            start = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// The common case, without generic dispatch (one copy, no per-byte iteration; a large
    /// read with nothing pending is taken as it is).
    public mutating func append(_ bytes: [UInt8]) {
        if start == storage.count {
            if bytes.count >= 4096 {
                storage = bytes
                start = 0
                return
            }
            storage.removeAll(keepingCapacity: true)
            start = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// The bytes from storage index `from` up to `end` (both absolute), consumed through `end`.
    public mutating func take(from: Int, to end: Int) -> [UInt8] {
        let bytes = Array(storage[from..<end])
        start = end
        if start > 65536 && start * 2 > storage.count {
            storage.removeFirst(start)
            start = 0
        }
        return bytes
    }
}
