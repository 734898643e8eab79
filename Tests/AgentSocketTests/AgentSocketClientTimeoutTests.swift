import AgentCore
import AgentSocket
import AgentTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A request the git helpers send through the agent socket (``AgentSocketCoderREST``) ends
/// within the timeout it is given, its connection closed, when the socket accepts and never
/// answers (a stopped agent, another program at the path) or accepts no connection at all.
@Suite(.timeLimit(.minutes(2)))
struct AgentSocketClientTimeoutTests {
    static let route = "/api/v2/workspaceagents/me/gitsshkey"
    /// Long enough for the connect and the request to go out on a busy host.
    static let timeout = Duration.seconds(2)

    /// What a call run in a task of its own ended with, once it has.
    final class Outcome: Sendable {
        private let state = Mutex<(error: String?, elapsed: Duration)?>(nil)
        func finish(_ error: String?, _ elapsed: Duration) { state.withLock { $0 = (error, elapsed) } }
        var value: (error: String?, elapsed: Duration)? { state.withLock { $0 } }
    }

    /// `GET route` through the socket at `path` with ``timeout``, in a task of its own (the
    /// test waits for it with a bound of its own, whatever the client does).
    static func startRequest(_ path: String) -> (Task<Void, Never>, Outcome) {
        let outcome = Outcome()
        let rest = AgentSocketCoderREST(client: AgentSocketClient(path: path))
        let (route, timeout) = (Self.route, Self.timeout)
        let task = Task {
            let start = ContinuousClock.now
            do {
                _ = try await rest.get(route, timeout: timeout)
                outcome.finish(nil, ContinuousClock.now - start)
            } catch {
                outcome.finish("\(error)", ContinuousClock.now - start)
            }
        }
        return (task, outcome)
    }

    /// A non-blocking listening socket at a fresh path that nothing serves.
    static func listener(backlog: Int32) throws -> (directory: String, path: String, fd: Int32) {
        let directory = try socketDirectory()
        let path = directory + "/agent.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        try #require(fd >= 0)
        try #require(UnixSocket.withAddress(path) { bind(fd, $0, $1) } == 0 && Glibc.listen(fd, backlog) == 0)
        return (directory, path, fd)
    }

    @Test func aSocketThatAcceptsAndNeverAnswersTimesOutAndTheConnectionIsClosed() async throws {
        let (directory, path, listener) = try Self.listener(backlog: 4)
        defer {
            close(listener)
            try? FileManager.default.removeItem(atPath: directory)
        }
        let (task, outcome) = Self.startRequest(path)
        defer { task.cancel() }
        // The connection is accepted and the request read; no answer is ever sent.
        var accepted: Int32 = -1
        var deadline = PollDeadline(.seconds(20))
        while accepted < 0, !deadline.hasPassed {
            accepted = Glibc.accept(listener, nil, nil)
            if accepted < 0 { await deadline.sleep(.milliseconds(5)) }
        }
        try #require(accepted >= 0, "the client connected")
        _ = fcntl(accepted, F_SETFD, FD_CLOEXEC)
        let server = LoopbackSocket(descriptor: accepted)
        let request = await server.read(until: "CoderdGet", timeout: .seconds(20))
        #expect(String(decoding: request, as: UTF8.self).contains("CoderdGet"), "the request arrived")

        #expect(await eventually(timeout: .seconds(20)) { outcome.value != nil }, "the call ends without an answer")
        let (error, elapsed) = try #require(outcome.value)
        #expect(error?.contains("GET \(Self.route): agent socket \(path): no answer to CoderdGet within 2s") == true, "\(error ?? "no error")")
        // Not before the timeout; that it is the timeout that ended the call, not a later
        // default, the error's text says.
        #expect(elapsed >= Self.timeout, "\(elapsed)")
        #expect(await server.isClosedByPeer(within: .seconds(20)), "the client ended its side")
        // Closed, not only half-closed: a send to a descriptor closed on the other side fails.
        #expect(await eventually(timeout: .seconds(20)) { !server.send([0]) }, "the client closed its descriptor")
    }

    @Test func aSocketThatNeverAcceptsTimesOutInTheConnect() async throws {
        let (directory, path, listener) = try Self.listener(backlog: 0)
        defer {
            close(listener)
            try? FileManager.default.removeItem(atPath: directory)
        }
        // Fill the backlog with non-blocking connects until the kernel refuses one.
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        var full = false
        for _ in 0..<64 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            held.append(fd)
            if UnixSocket.withAddress(path, { Glibc.connect(fd, $0, $1) }) != 0 {
                full = true
                break
            }
        }
        try #require(full, "the backlog filled")
        let (task, outcome) = Self.startRequest(path)
        defer { task.cancel() }
        #expect(await eventually(timeout: .seconds(20)) { outcome.value != nil }, "the call ends although the agent never accepts")
        let (error, elapsed) = try #require(outcome.value)
        #expect(
            error?.contains("GET \(Self.route): connect to agent socket: dial unix \(path): timed out after 2s: the socket accepts no connection") == true,
            "\(error ?? "no error")")
        #expect(elapsed >= Self.timeout, "\(elapsed)")
    }

    @Test func anAgentThatAnswersInTimeIsHeard() async throws {
        try await withSocketServer { client, _ in
            let rest = AgentSocketCoderREST(client: client)
            let error = await #expect(throws: CoderRESTError.self) { try await rest.get(Self.route, timeout: .seconds(20)) }
            // The agent's own answer (it runs without a control plane), not a timeout.
            #expect(error?.description.contains("there is no coderd to ask") == true, "\(String(describing: error))")
        }
    }

    /// A socket another user listens at (a shared /tmp lets anyone take the default path
    /// first) is refused at the connect: its server could have answered for the agent (a
    /// key for `gitssh`, a password for askpass). Before, the request went out and the
    /// call waited for the answer.
    @Test func aSocketServedByAnotherUserIsRefused() async throws {
        guard SilentUnixListener.available else {
            print("skipped: the test needs root, setpriv and python3 to listen as another user")
            return
        }
        let directory = try socketDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o777)
        let path = directory + "/agent.sock"
        let server = try #require(SilentUnixListener.start(at: path, uid: 65534))
        defer { server.kill() }
        let (task, outcome) = Self.startRequest(path)
        defer { task.cancel() }
        #expect(await eventually(timeout: .seconds(20)) { outcome.value != nil }, "the call ends")
        let error = try #require(outcome.value).error ?? "no error"
        #expect(error.contains("\(path) is served by a process of another user (uid 65534), not the agent: refused"), "\(error)")
    }
}
