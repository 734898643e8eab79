/// The newest bytes of a terminal's output, replayed to each new attachment (the reference's
/// 64 KiB ring buffer).
///
/// Memory: ``capacity`` bytes.
struct ReplayBuffer: Sendable {
    /// The reference's size.
    static let defaultCapacity = 64 << 10

    let capacity: Int
    private var storage: [UInt8] = []
    /// Where the oldest byte is, once the storage is full.
    private var head = 0

    init(capacity: Int = Self.defaultCapacity) {
        self.capacity = capacity
    }

    mutating func append(_ bytes: some Collection<UInt8>) {
        var bytes = Array(bytes)
        if bytes.count >= capacity {
            storage = Array(bytes.suffix(capacity))
            head = 0
            return
        }
        let room = capacity - storage.count
        if room > 0 {
            storage.append(contentsOf: bytes.prefix(room))
            bytes.removeFirst(min(room, bytes.count))
        }
        for byte in bytes {
            storage[head] = byte
            head = (head + 1) % capacity
        }
    }

    /// The kept bytes, oldest first.
    var contents: [UInt8] {
        Array(storage[head...] + storage[..<head])
    }
}
