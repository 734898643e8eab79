/// Makes a script's output line fit for the control plane, as the reference's
/// `SanitizeLogOutput` does (`strings.ToValidUTF8(s, "❌")`, then every NUL to `❌`): protobuf
/// string fields must be valid UTF-8 and PostgreSQL text columns reject NUL.
///
/// Go's rule, reproduced byte for byte: a byte that does not start a well-formed UTF-8
/// sequence (Unicode Table 3-7: no overlongs, no surrogates, nothing above U+10FFFF) is
/// invalid and consumed alone; a run of consecutive invalid bytes becomes ONE `❌`; any
/// valid character (ASCII included) ends the run. Each NUL is a valid character in that
/// pass and is then replaced on its own, so `"\xff\0\xff"` gives three `❌`.
///
/// Fast path: one validating pass (eight bytes per step over ASCII) and then the String,
/// no other copy. Memory: the result, at most 3 × the input (each invalid byte or NUL
/// may become 3 bytes).
enum LogSanitizer {
    /// `❌` (U+274C) in UTF-8.
    static let replacement: [UInt8] = [0xE2, 0x9D, 0x8C]

    static func sanitize(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { sanitize($0) }
    }

    static func sanitize(_ bytes: UnsafeRawBufferPointer) -> String {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return "" }
        let input = UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        // `String(decoding:)` of valid input is the cheap way in (`String(validating:)` takes
        // its generic path here, about four times slower).
        return isCleanUTF8(input) ? String(decoding: input, as: UTF8.self) : repaired(input)
    }

    /// Valid UTF-8 without NUL; eight ASCII bytes per step while it is ASCII.
    static func isCleanUTF8(_ input: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = input.count
        guard let base = input.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var index = 0
        while index < count {
            if index + 8 <= count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                // No high bit set and no zero byte (the classic has-zero-byte test).
                let hasZero = (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080
                if word & 0x8080_8080_8080_8080 == 0 && hasZero == 0 {
                    index += 8
                    continue
                }
            }
            let byte = input[index]
            if byte < 0x80 {
                guard byte != 0 else { return false }
                index += 1
                continue
            }
            let width = validSequenceWidth(input, at: index)
            guard width > 0 else { return false }
            index += width
        }
        return true
    }

    /// The slow path: copies valid characters, one `❌` per run of invalid bytes, one per NUL.
    private static func repaired(_ input: UnsafeBufferPointer<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(input.count + 16)
        var index = 0
        var inInvalidRun = false
        let count = input.count
        while index < count {
            let byte = input[index]
            if byte < 0x80 {
                if byte == 0 { output.append(contentsOf: replacement) } else { output.append(byte) }
                inInvalidRun = false
                index += 1
                continue
            }
            let width = validSequenceWidth(input, at: index)
            if width == 0 {
                if !inInvalidRun { output.append(contentsOf: replacement) }
                inInvalidRun = true
                index += 1
                continue
            }
            output.append(contentsOf: input[index..<(index + width)])
            inInvalidRun = false
            index += width
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The length (2...4) of the well-formed multibyte sequence starting at `index`, or 0
    /// when the byte there does not start one (Go's `DecodeRune` returning width 1 with
    /// `RuneError`).
    static func validSequenceWidth(_ input: UnsafeBufferPointer<UInt8>, at index: Int) -> Int {
        let lead = input[index]
        let remaining = input.count - index
        @inline(__always) func isContinuation(_ offset: Int) -> Bool { input[index + offset] & 0xC0 == 0x80 }
        switch lead {
        case 0xC2...0xDF:
            return remaining >= 2 && isContinuation(1) ? 2 : 0
        case 0xE0...0xEF:
            guard remaining >= 3 else { return 0 }
            let second = input[index + 1]
            let secondOK: Bool
            switch lead {
            case 0xE0: secondOK = (0xA0...0xBF).contains(second)
            case 0xED: secondOK = (0x80...0x9F).contains(second)
            default: secondOK = (0x80...0xBF).contains(second)
            }
            return secondOK && isContinuation(2) ? 3 : 0
        case 0xF0...0xF4:
            guard remaining >= 4 else { return 0 }
            let second = input[index + 1]
            let secondOK: Bool
            switch lead {
            case 0xF0: secondOK = (0x90...0xBF).contains(second)
            case 0xF4: secondOK = (0x80...0x8F).contains(second)
            default: secondOK = (0x80...0xBF).contains(second)
            }
            return secondOK && isContinuation(2) && isContinuation(3) ? 4 : 0
        default:
            return 0
        }
    }
}
