/// The 12-byte AEAD nonce: four zero bytes, then the counter little-endian.
/// Three 32-bit words, so there is no padding between the zeros and the counter.
struct Nonce12 {
    var zero: UInt32 = 0
    var low: UInt32
    var high: UInt32
    init(counter: UInt64) {
        low = UInt32(truncatingIfNeeded: counter).littleEndian
        high = UInt32(truncatingIfNeeded: counter >> 32).littleEndian
    }
}
