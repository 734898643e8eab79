/// Bounds-checked little-endian reads from an X server's bytes (the agent's connections
/// ask for little-endian): nil past the end instead of a trap.
struct XBytes {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func uint8(_ offset: Int) -> UInt8? {
        offset >= 0 && offset < bytes.count ? bytes[offset] : nil
    }

    func uint16(_ offset: Int, bigEndian: Bool = false) -> UInt16? {
        guard offset >= 0, offset + 2 <= bytes.count else { return nil }
        let (a, b) = (UInt16(bytes[offset]), UInt16(bytes[offset + 1]))
        return bigEndian ? a << 8 | b : b << 8 | a
    }

    func int16(_ offset: Int) -> Int? {
        uint16(offset).map { Int(Int16(bitPattern: $0)) }
    }

    func uint32(_ offset: Int) -> UInt32? {
        guard offset >= 0, offset + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for k in (0..<4).reversed() { value = value << 8 | UInt32(bytes[offset + k]) }
        return value
    }

    func string(_ offset: Int, _ length: Int) -> String? {
        guard offset >= 0, length >= 0, offset + length <= bytes.count else { return nil }
        return String(decoding: bytes[offset..<(offset + length)], as: UTF8.self)
    }
}
