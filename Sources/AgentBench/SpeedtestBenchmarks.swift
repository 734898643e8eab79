import AgentSpeedtest
import ArgumentParser
import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// `agent-bench speedtest`: a `coder speedtest` download from the agent's speed test server
/// (tailnet port 3's handler, on a loopback listener) against a bare NIO writer of 2 MiB
/// blocks, both read by the same blocking client until the server closes. The ratio is what
/// the handler's bookkeeping (the request, the slices whose drain it watches) costs.
struct SpeedtestBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "speedtest", abstract: "The speed test's download against a bare NIO writer of the same blocks.")

    @Option(help: "Milliseconds each test lasts.") var milliseconds = 1000
    @Option(help: "Tests per side, taking turns.") var rounds = 15

    func validate() throws {
        // The agent cuts a test to 30 s, which the bare writer would not.
        guard (1...30_000).contains(milliseconds) else { throw ValidationError("--milliseconds must be 1 to 30000") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
    }

    func run() async throws {
        let agent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { SpeedtestServer().serve($0) }
            .bind(host: "127.0.0.1", port: 0).get()
        let bare = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { child in
                child.eventLoop.makeCompletedFuture { try child.pipeline.syncOperations.addHandler(BareBlockWriter(milliseconds: milliseconds)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let request = #"{"version":2,"time":\#(milliseconds * 1_000_000),"direction":0}"# + "\n"
        print("agent-bench speedtest: \(rounds) downloads of \(milliseconds) ms per side, taking turns")
        var ours: [Double] = []
        var theirs: [Double] = []
        var ratios: [Double] = []
        for round in 0...rounds {
            // Each side goes first in every other round.
            let ports = [agent.localAddress?.port ?? 0, bare.localAddress?.port ?? 0]
            var rates = [0.0, 0.0]
            for side in round % 2 == 0 ? [0, 1] : [1, 0] {
                guard let rate = Self.download(port: ports[side], request: request) else { throw ValidationError("a download failed") }
                rates[side] = rate
            }
            let (agentRate, bareRate) = (rates[0], rates[1])
            if round > 0 {  // the first round warms both up
                ours.append(agentRate)
                theirs.append(bareRate)
                ratios.append(agentRate / bareRate)
            }
        }
        // The median of the rounds' ratios: the two downloads of a round run back to back,
        // while this host's loopback rate moves by a third from one round to another.
        let ratio = Bench.median(ratios)
        report(
            "download, 2 MiB blocks", value: String(format: "%.0f MiB/s", Bench.median(ours)),
            baseline: String(format: "%.0f MiB/s", Bench.median(theirs)), ratio: ratio, goal: ">= 0.85x a bare NIO writer", met: ratio >= 0.85)
        try await agent.close()
        try await bare.close()
    }

    /// MiB/s from the answer's line to the server's close, or nil when the test failed
    /// (no answer, or not whole blocks).
    static func download(port: Int, request: String) -> Double? {
        guard let fd = Bench.connect(port: port) else { return nil }
        defer { close(fd) }
        // A server that never closes fails the download instead of holding the benchmark.
        var limit = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard Bench.sendAll(fd, Array(request.utf8)) else { return nil }
        var answer: [UInt8] = []
        var byte: UInt8 = 0
        while answer.last != UInt8(ascii: "\n") {
            guard recv(fd, &byte, 1, 0) == 1, answer.count < 64 else { return nil }
            answer.append(byte)
        }
        let start = Bench.now()
        var total = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            total += count
        }
        guard answer == Array("{}\n".utf8), total > 0, total % (2 << 20) == 0 else { return nil }
        return Double(total) / 1_048_576 / (Double(Bench.now() - start) / 1e9)
    }
}

/// The baseline: on a connection's first bytes, answers `{}` and writes one 2 MiB block after
/// another with `writeAndFlush` while the channel is writable, until the time has passed;
/// closes once the last block is out.
private final class BareBlockWriter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private static let block: ByteBuffer = {
        var buffer = ByteBufferAllocator().buffer(capacity: 2 << 20)
        buffer.writeRepeatingByte(0x5a, count: 2 << 20)
        return buffer
    }()

    private let duration: TimeAmount
    private var deadline: NIODeadline?
    private var last: EventLoopFuture<Void>?
    private var pumping = false
    private var finished = false

    init(milliseconds: Int) { duration = .milliseconds(Int64(milliseconds)) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard deadline == nil else { return }
        deadline = .now() + duration
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "{}\n")), promise: nil)
        pump(context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        pump(context: context)
        context.fireChannelWritabilityChanged()
    }

    private func pump(context: ChannelHandlerContext) {
        guard !pumping else { return }
        pumping = true
        defer { pumping = false }
        while !finished, let end = deadline, context.channel.isWritable {
            guard NIODeadline.now() < end else {
                finished = true
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                (last ?? context.eventLoop.makeSucceededVoidFuture()).whenComplete { _ in bound.value.close(promise: nil) }
                return
            }
            last = context.writeAndFlush(wrapOutboundOut(Self.block))
        }
    }
}
