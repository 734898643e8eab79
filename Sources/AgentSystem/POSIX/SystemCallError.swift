#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: `call: strerror(errno)`, lowercase like Go's messages.
public struct SystemCallError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(SystemCallError.message(errno))" }

    /// `strerror` with a lowercase first letter, matching Go's error strings.
    public static func message(_ code: Int32) -> String {
        let text = String(cString: strerror(code))
        guard let first = text.first else { return text }
        return first.lowercased() + text.dropFirst()
    }
}
