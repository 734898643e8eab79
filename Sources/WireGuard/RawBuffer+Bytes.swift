import CTailnetCrypto

/// Raw buffers as byte pointers for the C calls.
extension UnsafeRawBufferPointer {
    /// The start as bytes (nil for an empty buffer with no base).
    @inline(__always) var u8: UnsafePointer<UInt8>? { baseAddress?.assumingMemoryBound(to: UInt8.self) }
}

extension UnsafeMutableRawBufferPointer {
    @inline(__always) var u8: UnsafeMutablePointer<UInt8>? { baseAddress?.assumingMemoryBound(to: UInt8.self) }
}

/// Zeroes a buffer in a way the compiler keeps.
@inline(__always)
func tc_zero_raw(_ raw: UnsafeMutableRawBufferPointer) {
    if let base = raw.baseAddress { tc_zero(base, raw.count) }
}
