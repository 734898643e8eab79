/// A server-side streaming call, as its handler sees it.
public struct DRPCServerCall: Sendable {
    /// The method invoked.
    public let method: String
    let inbox: DRPCInbox
    let sender: DRPCStreamSender

    /// The client's next message, or nil after its CloseSend. Throws when the client
    /// closed or cancelled the stream, or the transport died.
    public func receive() async throws(DRPCCallError) -> [UInt8]? {
        try await inbox.take()
    }

    /// Sends one message to the client.
    public func send(_ message: [UInt8]) async throws(DRPCCallError) {
        try await sender.send(message)
    }
}
