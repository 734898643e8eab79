/// What a push-mode stream delivers (see ``YamuxSession/setSink(_:_:)``).
public enum YamuxStreamEvent: Sendable {
    /// Bytes from the peer.
    case data([UInt8])
    /// The peer's FIN: no more data.
    case end
    /// The stream was reset or the session ended.
    case failed(YamuxSessionError)
}
