import AgentTLS
import AgentCore
import AgentRPC
import AgentTestSupport
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Scripts
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the reporter tests share: a session against the control-plane double, a participant
/// made of a closure, a loopback HTTP server whose answers a test changes, and a metadata
/// collector that runs `/bin/sh -c` for real.
enum ReporterTestKit {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    /// How long a wait may take on a loaded 2-core host (a passing wait returns at once).
    static let patience: Duration = .seconds(60)

    /// A real control-plane session (WebSocket, yamux, dRPC) to the double at `url`.
    static func makeSession(_ url: String, token: String, participants: [any UpwardParticipant]) -> ControlPlaneSession {
        var configuration = ControlPlaneSession.Configuration(agentVersion: "0.1.0")
        configuration.shutdownDeadline = .seconds(30)
        return ControlPlaneSession(
            configuration: configuration, dialer: WebSocketDialer(baseURL: url, token: token, version: "2.10", logger: quiet),
            logger: quiet, participants: UpwardParticipants(participants))
    }

    /// A participant made of a closure (wraps a reporter as the module's participant will).
    struct Participant: UpwardParticipant {
        let name: String
        let body: @Sendable (any UpwardSession) async throws -> Void

        func run(on session: any UpwardSession) async throws {
            try await body(session)
        }
    }

    /// A 16-byte id whose bytes are all `byte`.
    static func uuid(_ byte: UInt8) -> [UInt8] { [UInt8](repeating: byte, count: 16) }

    /// Runs `script` with `/bin/sh -c`, stdout and stderr into one buffer, killed (SIGKILL) at
    /// `timeout`: the reference's texts (`run cmd: exit status N`; a timeout adds
    /// `context deadline exceeded`), output capped as the reference caps it. The reading is
    /// done on a thread of its own; the script should `exec` its last long command so that the
    /// kill closes the pipe.
    static func shellCollect(_ description: ManifestMetadata, timeout: Duration) async -> (value: String, error: String) {
        guard let child = ChildProgram.start(["/bin/sh", "-c", description.script], stderrToStdout: true) else {
            return ("", "start cmd: could not start /bin/sh")
        }
        close(child.stdin)
        let timedOut = TestFlag()
        let finished = TestFlag()
        let killer = Task {
            let deadline = ContinuousClock.now + timeout
            while !finished.isSet, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
            if !finished.isSet {
                timedOut.set()
                _ = kill(child.pid, SIGKILL)
            }
        }
        let (output, status) = await onThread { () -> ([UInt8], Int32) in
            var output: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            // Bounded by the child's output, which ends at its exit or the kill.
            while true {
                let n = chunk.withUnsafeMutableBytes { read(child.stdout, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                output += chunk[0..<n]
            }
            close(child.stdout)
            return (output, child.wait())
        }
        finished.set()
        await killer.value
        let (value, note) = MetadataReporter.capped(output)
        var errors: [String] = []
        if status > 128 {
            errors.append("signal: \(status == 128 + SIGKILL ? "killed" : "\(status - 128)")")
        } else if status != 0 {
            errors.append("exit status \(status)")
        }
        if let note { errors.append(note) }
        if timedOut.isSet { errors.append("context deadline exceeded") }
        return (value, errors.isEmpty ? "" : "run cmd: " + errors.joined(separator: "\n"))
    }

    /// A throwaway certificate for `names` (openssl's subject alternative names), made by
    /// the `openssl` CLI as the DERP relay double makes its own, in a fresh directory the
    /// caller removes.
    static func selfSignedCertificate(names: String) async throws -> (certificate: String, key: String, directory: String) {
        let made = try await TestCertificate.make(names: names)
        return (made.certificate, made.key, made.directory)
    }

    /// A loopback HTTP server whose answer per path a test sets: a status, a redirect, or
    /// none at all (the connection stays open, silent). Unknown paths answer 200. Every
    /// answer announces a 1 MiB body and sends only a little of it: a client that waited for
    /// the body would never finish.
    final class HTTPServer: Sendable {
        enum Behavior: Sendable {
            case status(Int)
            case redirect(String)
            case silent
        }

        /// The answers per path and the requests seen (shared with the connections' handlers).
        final class Routes: Sendable {
            let behaviors = Mutex<[String: Behavior]>([:])
            /// Every request's path, in arrival order (bounded by the tests' few requests).
            let hits = Mutex<[String]>([])

            func behavior(for path: String) -> Behavior {
                hits.withLock { $0.append(path) }
                return behaviors.withLock { $0[path] } ?? .status(200)
            }
        }

        let routes: Routes
        let port: Int
        private let channel: any Channel

        private init(channel: any Channel, routes: Routes) {
            self.channel = channel
            self.routes = routes
            self.port = channel.localAddress?.port ?? 0
        }

        /// Starts the server on an ephemeral loopback port; https when `tls` is given.
        static func start(tls: TLSContext? = nil) async throws -> HTTPServer {
            let routes = Routes()
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls { try channel.pipeline.syncOperations.addHandler(TLSHandler(server: tls)) }
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(Handler(routes: routes))
                    }
                }
                .bind(host: "127.0.0.1", port: 0).get()
            return HTTPServer(channel: channel, routes: routes)
        }

        func set(_ path: String, _ behavior: Behavior) { routes.behaviors.withLock { $0[path] = behavior } }

        var hits: [String] { routes.hits.withLock { $0 } }

        func url(_ path: String, scheme: String = "http", host: String = "127.0.0.1") -> String { "\(scheme)://\(host):\(port)\(path)" }

        func stop() async { try? await channel.close() }

        final class Handler: ChannelInboundHandler {
            typealias InboundIn = HTTPServerRequestPart
            typealias OutboundOut = HTTPServerResponsePart
            let routes: Routes
            init(routes: Routes) { self.routes = routes }

            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                guard case .head(let request) = unwrapInboundIn(data) else { return }
                var headers = HTTPHeaders()
                let status: Int
                switch routes.behavior(for: request.uri) {
                case .silent: return
                case .status(let code): status = code
                case .redirect(let location):
                    status = 302
                    headers.add(name: "Location", value: location)
                }
                headers.add(name: "Content-Length", value: "\(1 << 20)")
                let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "partial body")))), promise: nil)
            }

            func errorCaught(context: ChannelHandlerContext, error: any Error) {
                context.close(promise: nil)
            }
        }
    }
}
