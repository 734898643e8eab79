import NIOCore

/// The length the head of an answer made at once states.
enum StatedLength {
    /// Its body's.
    case body
    /// A HEAD's answer: the length the body it leaves out would have had, if known (no
    /// length field otherwise).
    case ofOmittedBody(Int?)

    func length(of body: ByteBuffer) -> Int? {
        switch self {
        case .body: body.readableBytes
        case .ofOmittedBody(let length): length
        }
    }
}
