/// The proxy's answer to `CONNECT`, read from the bytes as they arrive (sans-IO): the status
/// line and headers up to the blank line, at most ``maxHeadBytes``. Go's transport accepts
/// only 200; anything else is the proxy's refusal, with its status and reason.
public struct ProxyConnectAnswer: Sendable {
    /// A longer answer head is refused (a proxy's CONNECT answer is a few hundred bytes).
    public static let maxHeadBytes = 16 * 1024

    public enum Outcome: Sendable, Equatable {
        /// More bytes are needed.
        case incomplete
        /// 200: the tunnel is up; `rest` are bytes after the head (the target's, already).
        case established(rest: [UInt8])
        /// Any other status, with the status line's reason.
        case refused(status: Int, reason: String)
        /// Not an HTTP answer, or a head longer than ``maxHeadBytes``.
        case malformed(String)
    }

    private var head: [UInt8] = []
    private var scanned = 0

    public init() {}

    /// Takes the next bytes; once the outcome is not ``Outcome/incomplete`` no more are taken.
    public mutating func feed(_ bytes: some Collection<UInt8>) -> Outcome {
        head.append(contentsOf: bytes)
        // The blank line: "\r\n\r\n" (a bare "\n\n" as Go's reader also accepts it).
        var index = max(0, scanned - 3)
        var end: Int?
        while index < head.count {
            if head[index] == UInt8(ascii: "\n") {
                if index + 1 < head.count, head[index + 1] == UInt8(ascii: "\n") {
                    end = index + 2
                    break
                }
                if index + 2 < head.count, head[index + 1] == UInt8(ascii: "\r"), head[index + 2] == UInt8(ascii: "\n") {
                    end = index + 3
                    break
                }
            }
            index += 1
        }
        scanned = head.count
        guard let end else {
            // The same bound as below, whatever the split: a head may end 4 bytes past it.
            return head.count > Self.maxHeadBytes + 4 ? .malformed("an answer head over \(Self.maxHeadBytes) bytes") : .incomplete
        }
        guard end <= Self.maxHeadBytes + 4 else { return .malformed("an answer head over \(Self.maxHeadBytes) bytes") }
        let lineEnd = head.firstIndex(of: UInt8(ascii: "\n")) ?? end
        var line = head[..<lineEnd]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        guard let status = Self.status(of: line) else {
            return .malformed("a status line that is not HTTP/1.x")
        }
        if status.code == 200 { return .established(rest: Array(head[end...])) }
        return .refused(status: status.code, reason: status.reason)
    }

    /// `HTTP/1.x NNN reason` → the code and the reason (printable ASCII, at most 200 bytes).
    static func status(of line: ArraySlice<UInt8>) -> (code: Int, reason: String)? {
        let bytes = Array(line)
        let prefix = Array("HTTP/1.".utf8)
        guard bytes.count >= 12, Array(bytes[0..<7]) == prefix, bytes[7] >= UInt8(ascii: "0"), bytes[7] <= UInt8(ascii: "9"), bytes[8] == UInt8(ascii: " ")
        else { return nil }
        let digits = bytes[9..<12]
        guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), bytes.count == 12 || bytes[12] == UInt8(ascii: " ") else {
            return nil
        }
        let code = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        let reason = bytes.dropFirst(13).prefix(200).map { $0 >= 0x20 && $0 < 0x7f ? Character(Unicode.Scalar($0)) : "?" }
        return (code, String(reason))
    }
}
