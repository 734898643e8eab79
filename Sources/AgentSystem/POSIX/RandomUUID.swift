/// Random (version 4) UUIDs as lowercase text, from `getrandom` (the standard library's
/// generator): FoundationEssentials' `UUID()` opens, reads and closes `/dev/urandom` for
/// each one, a path lookup and three system calls on every process start and atomic write.
public enum RandomUUID {
    /// A new UUID, e.g. `3f2c9a4e-1b7d-4c8e-9f01-6a5b4c3d2e1f`.
    public static func lowercased() -> String {
        // The standard library's generator reads the kernel's pool with getrandom(2).
        var generator = SystemRandomNumberGenerator()
        var bytes: (UInt64, UInt64) = (generator.next(), generator.next())
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40
            raw[8] = (raw[8] & 0x3F) | 0x80
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            return String(unsafeUninitializedCapacity: 36) { out in
                var at = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    out[at] = hex[Int(raw[index] >> 4)]
                    out[at + 1] = hex[Int(raw[index] & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }
}
