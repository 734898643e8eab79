import CAgentSpawn
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One thread that watches every child: an epoll set over each child's output pipe and
/// its pidfd.
///
/// - Output is read in 256 KiB chunks straight into the sink (no per-chunk allocation).
/// - A readable pidfd means the shell exited: the pipe is drained of what the shell wrote,
///   then the shell is reaped with `waitpid(pid)` (never `-1`, so other spawners in the same
///   process keep their children). Exit is reported even while an orphan (`cmd &`) still
///   holds the pipe; its later output keeps flowing into the sink until EOF.
/// - Memory: one 256 KiB scratch buffer and one small record per watched child.
final class ProcessReactor: Sendable {
    static let readChunk = 256 * 1024
    /// Reads per readiness event, so one chatty child cannot starve the others.
    static let readsPerEvent = 4
    /// Reads when draining at exit: bounded, so an orphan writing forever cannot stall exit.
    static let readsAtExit = 64

    private struct Watch {
        var pid: pid_t
        var pidfd: Int32
        var pipefd: Int32
        var sink: any ProcessEventSink
    }

    private enum Command {
        case closeOutput(UInt64)
        case stop
    }

    private struct State {
        var watches: [UInt64: Watch] = [:]
        var commands: [Command] = []
        var nextToken: UInt64 = 1
        var stopped = false
    }

    private let epfd: Int32
    private let wakefd: Int32
    private let state = Mutex(State())
    private let finished = OneShotSignal()

    init() throws {
        epfd = agent_epoll_create()
        guard epfd >= 0 else { throw SystemCallError(call: "epoll_create1", errno: errno) }
        wakefd = agent_eventfd()
        guard wakefd >= 0 else {
            close(epfd)
            throw SystemCallError(call: "eventfd", errno: errno)
        }
        agent_epoll_add(epfd, wakefd, 0)
        let thread = Thread { [self] in self.loop() }
        thread.name = "agent-proc-reactor"
        thread.start()
    }

    /// Starts watching a child; the reactor owns `pidfd` and `pipefd` from now on.
    /// Returns a token for ``closeOutput(_:)``, or nil (fds closed) after ``stop()``.
    func watch(pid: pid_t, pidfd: Int32, pipefd: Int32, sink: any ProcessEventSink) -> UInt64? {
        let token = state.withLock { s -> UInt64? in
            guard !s.stopped else { return nil }
            let token = s.nextToken
            s.nextToken += 1
            s.watches[token] = Watch(pid: pid, pidfd: pidfd, pipefd: pipefd, sink: sink)
            return token
        }
        guard let token else {
            close(pidfd)
            close(pipefd)
            return nil
        }
        agent_epoll_add(epfd, pipefd, token << 1)
        agent_epoll_add(epfd, pidfd, token << 1 | 1)
        return token
    }

    /// Stops reading a child's output (its orphans then get SIGPIPE); used when reaping.
    func closeOutput(_ token: UInt64) {
        send(.closeOutput(token))
    }

    /// Closes every descriptor and ends the thread; children still running are not reaped.
    func stop() async {
        send(.stop)
        await finished.wait()
    }

    private func send(_ command: Command) {
        let accepted = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.commands.append(command)
            return true
        }
        guard accepted else { return }
        var one: UInt64 = 1
        _ = write(wakefd, &one, 8)
    }

    // MARK: Reactor thread

    private func loop() {
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readChunk, alignment: 16)
        defer { scratch.deallocate() }
        var events = [UInt64](repeating: 0, count: 64)
        running: while true {
            let n = events.withUnsafeMutableBufferPointer { agent_epoll_wait(epfd, $0.baseAddress, 64, -1) }
            if n < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in 0..<Int(n) {
                let data = events[i]
                if data == 0 {
                    if handleCommands(scratch) { break running }
                    continue
                }
                let token = data >> 1
                if data & 1 == 0 {
                    readOutput(token, scratch, maxReads: Self.readsPerEvent)
                } else {
                    reapChild(token, scratch)
                }
            }
        }
        shutdownDescriptors()
        finished.fire()
    }

    /// Returns true when told to stop.
    private func handleCommands(_ scratch: UnsafeMutableRawBufferPointer) -> Bool {
        var counter: UInt64 = 0
        _ = read(wakefd, &counter, 8)
        let commands = state.withLock { s -> [Command] in
            defer { s.commands.removeAll() }
            return s.commands
        }
        for command in commands {
            switch command {
            case .closeOutput(let token):
                closePipe(token)
            case .stop:
                return true
            }
        }
        return false
    }

    private func readOutput(_ token: UInt64, _ scratch: UnsafeMutableRawBufferPointer, maxReads: Int) {
        guard let watch = state.withLock({ $0.watches[token] }), watch.pipefd >= 0 else { return }
        for _ in 0..<maxReads {
            let n = read(watch.pipefd, scratch.baseAddress, scratch.count)
            if n > 0 {
                watch.sink.output(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
                if n < scratch.count { return }
            } else if n == 0 {
                closePipe(token)
                return
            } else {
                switch errno {
                case EINTR: continue
                case EAGAIN: return
                default:
                    closePipe(token)
                    return
                }
            }
        }
    }

    private func closePipe(_ token: UInt64) {
        let taken = state.withLock { s -> Watch? in
            guard var watch = s.watches[token], watch.pipefd >= 0 else { return nil }
            let result = watch
            watch.pipefd = -1
            if watch.pidfd < 0 {
                s.watches[token] = nil
            } else {
                s.watches[token] = watch
            }
            return result
        }
        guard let taken else { return }
        agent_epoll_del(epfd, taken.pipefd)
        close(taken.pipefd)
        taken.sink.outputClosed()
    }

    private func reapChild(_ token: UInt64, _ scratch: UnsafeMutableRawBufferPointer) {
        // Everything the shell wrote is in the pipe by now: take it before reporting exit,
        // so `running: false` means the shell's output is complete.
        readOutput(token, scratch, maxReads: Self.readsAtExit)
        guard let watch = state.withLock({ $0.watches[token] }), watch.pidfd >= 0 else { return }
        var status: Int32 = 0
        var result: pid_t
        repeat {
            result = waitpid(watch.pid, &status, WNOHANG)
        } while result < 0 && errno == EINTR
        if result == 0 { return } // spurious readiness; still running
        agent_epoll_del(epfd, watch.pidfd)
        close(watch.pidfd)
        state.withLock { s in
            guard var w = s.watches[token] else { return }
            w.pidfd = -1
            if w.pipefd < 0 { s.watches[token] = nil } else { s.watches[token] = w }
        }
        // result < 0 (ECHILD: someone else reaped it) is reported as a plain failure.
        watch.sink.exited(waitStatus: result < 0 ? 0xff00 : status)
    }

    private func shutdownDescriptors() {
        let watches = state.withLock { s -> [Watch] in
            s.stopped = true
            defer { s.watches.removeAll() }
            return Array(s.watches.values)
        }
        for watch in watches {
            if watch.pipefd >= 0 { close(watch.pipefd); watch.sink.outputClosed() }
            if watch.pidfd >= 0 { close(watch.pidfd) }
        }
        close(wakefd)
        close(epfd)
    }
}

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
