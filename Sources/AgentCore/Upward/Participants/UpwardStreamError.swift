/// Why an upward call or stream failed, in terms a participant can act on.
public struct UpwardStreamError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Equatable, Sendable {
        /// The control plane answered with an error (dRPC Error: its code and text).
        case remote(code: UInt64, message: String)
        /// The control plane does not serve this RPC (an older server).
        case unsupported
        /// The session dropped, or the stream's transport failed.
        case sessionEnded
        /// A received message was larger than the stream allows.
        case messageTooLarge(limit: Int)
        /// A send after this side closed the stream (CloseSend or cancel).
        case closed
        /// The control plane closed or cancelled the stream.
        case remoteClosed
        /// The peer broke the dRPC rules (the stream was reset).
        case protocolViolation
        /// The participant already has ``UpwardStreamLimits/maxStreams`` streams open.
        case tooManyStreams(limit: Int)
        /// The waiting task was cancelled (the stream was reset).
        case cancelled
    }

    /// What went wrong, to act on.
    public let kind: Kind
    /// What happened, for logs.
    public let detail: String

    /// An error of `kind`, with text for logs.
    public init(_ kind: Kind, _ detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    public var description: String {
        let what: String
        switch kind {
        case .remote(let code, let message): what = "control plane error (code \(code)): \(message)"
        case .unsupported: what = "the control plane does not serve this RPC"
        case .sessionEnded: what = "the upward session ended"
        case .messageTooLarge(let limit): what = "message larger than \(limit) bytes"
        case .closed: what = "stream closed"
        case .remoteClosed: what = "the control plane closed the stream"
        case .protocolViolation: what = "dRPC protocol violation"
        case .tooManyStreams(let limit): what = "more than \(limit) streams open"
        case .cancelled: what = "cancelled"
        }
        return detail.isEmpty ? what : "\(what): \(detail)"
    }
}
