import AgentCore

/// Errors thrown by `OutputSpoolStore` set-up calls (never by the write path, which
/// counts failures instead of throwing).
public enum SpoolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The id is not 1...64 characters of `[0-9a-f-]`.
    case invalidID(String)
    /// `Limits` violate `segmentBytes >= 1`, `maxBytesPerSpool >= segmentBytes`, `maxTotalBytes >= segmentBytes`.
    case invalidLimits
    /// A spool with this id is already open in this store or its directory already exists.
    case alreadyExists(String)
    /// A system call failed; `errno` is the raw error number.
    case system(call: String, path: String, errno: Int32)

    /// `mkdir /state/processes/spool: not a directory`, as a log line or a status wants it.
    public var description: String {
        switch self {
        case .invalidID(let id): "invalid spool id \(id)"
        case .invalidLimits: "invalid spool limits"
        case .alreadyExists(let id): "spool \(id) exists already"
        case .system(let call, let path, let code): "\(call) \(path): \(SystemCallError.message(code))"
        }
    }
}
