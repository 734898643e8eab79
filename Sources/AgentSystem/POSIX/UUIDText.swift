/// UUIDs as text: 16 bytes as lowercase `8-4-4-4-12` hex (as the reference prints them), new
/// random ones, and text read back.
public enum UUIDText {
    /// A new random (version 4) UUID, e.g. `3f2c9a4e-1b7d-4c8e-9f01-6a5b4c3d2e1f`, from
    /// `getrandom` (the standard library's generator): FoundationEssentials' `UUID()` opens,
    /// reads and closes `/dev/urandom` for each one, a path lookup and three system calls on
    /// every process start and atomic write.
    public static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes: (UInt64, UInt64) = (generator.next(), generator.next())
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40
            raw[8] = (raw[8] & 0x3F) | 0x80
            return format(raw)
        }
    }

    /// `bytes` in lowercase hex, hyphenated `8-4-4-4-12` when there are 16 of them.
    public static func format(_ bytes: some Collection<UInt8>) -> String {
        let hyphens = bytes.count == 16
        return String(unsafeUninitializedCapacity: bytes.count * 2 + (hyphens ? 4 : 0)) { out in
            var at = 0
            for (index, byte) in bytes.enumerated() {
                if hyphens, index == 4 || index == 6 || index == 8 || index == 10 {
                    out[at] = UInt8(ascii: "-")
                    at += 1
                }
                out[at] = digit(byte >> 4)
                out[at + 1] = digit(byte & 0x0F)
                at += 2
            }
            return at
        }
    }

    /// 16 bytes from UUID text (hyphens optional, any case); nil when it is not one.
    public static func parse(_ text: String) -> [UInt8]? {
        let hex = text.utf8.filter { $0 != UInt8(ascii: "-") }
        guard hex.count == 32 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        var index = 0
        while index < 32 {
            guard let high = value(hex[index]), let low = value(hex[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// The lowercase hex digit of `nibble` (0–15).
    private static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
