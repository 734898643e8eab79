@testable import AgentHTTP
import NIOCore
import NIOEmbedded
import Testing

/// No timer of a connection outlives its close, even a close that happens inside an earlier
/// action of the same list: a timer armed after it fires later on a closed connection.
@Suite struct ConnectionCloseTimerTests {
    /// The answer to a `Connection: close` request closes the output and arms the linger
    /// deadline in one list of actions. An `EmbeddedChannel` closes whole on an output close,
    /// as a socket does whose client already half-closed: the close lands between the two.
    @Test func aCloseInsideTheActionsLeavesNoTimerBehind() throws {
        let channel = EmbeddedChannel()
        try HTTPFuzzing.installConnection(on: channel, registry: HTTPConnectionRegistry())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let handler = try channel.pipeline.syncOperations.handler(type: HTTP1ConnectionHandler.self)
        #expect(handler.timers.contains { $0 != nil }, "the head deadline runs while a request is awaited")
        try channel.writeInbound(ByteBuffer(string: "GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        var out = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: buffer) }
        #expect(out.hasPrefix("HTTP/1.1 404 "), "\(out)")
        #expect(!channel.isActive)
        // Closed, its handler not yet removed (that is the loop's next task): no timer runs.
        #expect(handler.timers.allSatisfy { $0 == nil })
        _ = try? channel.finish(acceptAlreadyClosed: true)
    }

    /// A blocked socket is looked at every sixth of the write-stall time, not only at its
    /// deadline: a socket that took data just after the deadline was set, then nothing, was
    /// closed twice the write-stall time after it (60 s for 30).
    @Test func aBlockedSocketIsLookedAtEverySixthOfTheStallTime() {
        let timeout = Duration.seconds(30)
        #expect(HTTP1ConnectionHandler.stallWakeUp(in: .seconds(30), timeout: timeout) == .seconds(5))
        #expect(HTTP1ConnectionHandler.stallWakeUp(in: .seconds(2), timeout: timeout) == .seconds(2))
        #expect(HTTP1ConnectionHandler.stallWakeUp(in: .seconds(1), timeout: .microseconds(1)) == .milliseconds(1))
    }
}
